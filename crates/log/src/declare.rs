//! The one declaration of every record kind.
//!
//! [`records!`] takes, per kind, its code in the log, its name, the
//! Parquet table its rows go to (`table "..."`), whose record it is when
//! that is not its `pid` field's (`owner(r => ...)`), and its fields, each
//! with its column and its encoding. From that it makes the struct, its
//! [`Record`](crate::Record) arm, the encoder's and decoder's columns,
//! `merge`'s remapping of pids, strings and times, the owner, and a field
//! visitor for generic consumers (`dump`, Parquet tables). What a slice
//! is called and how stats count a kind are in the model and stats
//! crates.
//!
//! A field is `COLUMN name: Type = ENCODING`. Columns are this kind's
//! own, 0 to 31, and never renumbered (a reader treats a missing column as
//! zeros and skips one it does not know, so fields can be added). Fields
//! are decoded in the order declared, so an encoding that refers to another
//! field comes after it. The encodings, and the role they give a field:
//!
//! | encoding | stored as | role |
//! | --- | --- | --- |
//! | `plain` | the value (signed ones zigzag) | |
//! | `dur` | the value; `ts` plus the record's durs is where it ends | |
//! | `ts` | the distance from the last record's time, whatever its kind | time |
//! | `ts_end(d)` | as `ts`, of `value + d`: a call is written when it ends | time |
//! | `since(t)` | 0, or `t - value + 1` (a time before `t`) | time |
//! | `thread` | as `tid`; the thread whose predictions the later fields use | tid |
//! | `tid` | its place among the 16 threads named last, or 16 + the value | tid |
//! | `tid_of(t)` | `value - t` | tid |
//! | `pid` | the value | pid |
//! | `pid_of(t)` | 0 when thread `t`'s process is known to be it, else 1 + `t - value` | pid |
//! | `str`, `path` | the string's id; `path`: 0 when the thread's last path | string |
//! | `fd` | the distance from the thread's last fd | |
//! | `seq(slot, end)` | the distance from where the thread's last `slot` ended (`end`) | |
//! | `less(x)` | `x - value` (a result that usually equals what was asked) | |
//! | `rel(x)` | `value - x` | |
//! | `bias(n)` | `value - n` | |
//! | `guess(e)` | `value - e` | |
//! | `f64` | its 8 bytes | |
//!
//! Predictions are per thread (the `thread` field's), within one frame: a
//! thread's calls use the same fd and file, at the offset where the last
//! one ended, however many other threads write records in between. Times
//! are the exception: records reach the log in about the order they
//! happen, so a record's time is closest to the record before it, whoever's.

use crate::record::StrId;

/// What the encoder needs of a record: [`crate::Record`], matched on each
/// call, or one kind's struct, whose push compiles to that kind's columns
/// alone (the decoders' hot path: no enum built and matched four times).
pub trait Encode: Copy {
    fn code(&self) -> u8;
    fn ts(&self) -> u64;
    fn span_end(&self) -> u64;
    fn round_times(&mut self, q: u64);
    #[doc(hidden)]
    fn encode(&self, w: &mut crate::codec::W<'_>);
}

/// One field's value, as [`crate::Record::visit`] shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    U(u64),
    I(i64),
    Bool(bool),
    F64(f64),
    Str(StrId),
    /// A code's name (`pread64`, `file`).
    Code(&'static str),
    /// A time on the log's clock (ns).
    Time(u64),
}

/// A type a column can carry: its column value, and its value for the
/// arithmetic of the relative encodings.
pub trait FieldValue: Copy {
    fn to_col(self) -> u64;
    fn from_col(v: u64) -> Option<Self>;
    fn to_i(self) -> i64;
    fn from_i(v: i64) -> Option<Self>;
    fn value(self) -> Value;
}

macro_rules! unsigned_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            #[inline(always)]
            fn to_col(self) -> u64 { self as u64 }
            #[inline(always)]
            fn from_col(v: u64) -> Option<Self> { <$t>::try_from(v).ok() }
            #[inline(always)]
            fn to_i(self) -> i64 { self as i64 }
            #[inline(always)]
            fn from_i(v: i64) -> Option<Self> { <$t>::try_from(v).ok() }
            fn value(self) -> Value { Value::U(self as u64) }
        }
    )*};
}
unsigned_field!(u8, u16, u32);

impl FieldValue for u64 {
    #[inline(always)]
    fn to_col(self) -> u64 {
        self
    }
    #[inline(always)]
    fn from_col(v: u64) -> Option<Self> {
        Some(v)
    }
    /// Wraps: offsets and times are computed modulo 2^64.
    #[inline(always)]
    fn to_i(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn from_i(v: i64) -> Option<Self> {
        Some(v as u64)
    }
    fn value(self) -> Value {
        Value::U(self)
    }
}

macro_rules! signed_field {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            #[inline(always)]
            fn to_col(self) -> u64 { crate::varint::zigzag(self as i64) }
            #[inline(always)]
            fn from_col(v: u64) -> Option<Self> { <$t>::try_from(crate::varint::unzigzag(v)).ok() }
            #[inline(always)]
            fn to_i(self) -> i64 { self as i64 }
            #[inline(always)]
            fn from_i(v: i64) -> Option<Self> { <$t>::try_from(v).ok() }
            fn value(self) -> Value { Value::I(self as i64) }
        }
    )*};
}
signed_field!(i32, i64);

impl FieldValue for bool {
    fn to_col(self) -> u64 {
        u64::from(self)
    }
    fn from_col(v: u64) -> Option<Self> {
        match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn to_i(self) -> i64 {
        i64::from(self)
    }
    fn from_i(v: i64) -> Option<Self> {
        Self::from_col(v as u64)
    }
    fn value(self) -> Value {
        Value::Bool(self)
    }
}

impl FieldValue for StrId {
    fn to_col(self) -> u64 {
        u64::from(self.0)
    }
    fn from_col(v: u64) -> Option<Self> {
        u32::try_from(v).ok().map(StrId)
    }
    fn to_i(self) -> i64 {
        i64::from(self.0)
    }
    fn from_i(v: i64) -> Option<Self> {
        u32::try_from(v).ok().map(StrId)
    }
    fn value(self) -> Value {
        Value::Str(self)
    }
}

/// The encoder side of one field (see the module docs).
macro_rules! enc_field {
    ($w:ident, $c:literal, $f:ident, ts) => {
        $w.ts($c, $f)
    };
    ($w:ident, $c:literal, $f:ident, ts_end($d:ident)) => {
        $w.ts($c, $f.wrapping_add($d))
    };
    ($w:ident, $c:literal, $f:ident, since($b:ident)) => {
        $w.u($c, if $f == 0 { 0 } else { $b.wrapping_sub($f).wrapping_add(1) })
    };
    ($w:ident, $c:literal, $f:ident, thread) => {
        $w.thread($c, $f)
    };
    ($w:ident, $c:literal, $f:ident, tid) => {
        $w.tid($c, $f)
    };
    ($w:ident, $c:literal, $f:ident, str) => {
        $w.u($c, u64::from($f.0))
    };
    ($w:ident, $c:literal, $f:ident, path) => {
        $w.path($c, $f)
    };
    ($w:ident, $c:literal, $f:ident, fd) => {
        $w.fd($c, $f)
    };
    ($w:ident, $c:literal, $f:ident, seq($slot:literal, $e:expr)) => {
        $w.seq($c, $slot, $crate::declare::FieldValue::to_col($f))
    };
    ($w:ident, $c:literal, $f:ident, less($b:ident)) => {
        $w.i($c, ($b as i64).wrapping_sub($f))
    };
    ($w:ident, $c:literal, $f:ident, tid_of($b:ident)) => {
        $w.i($c, i64::from($f) - i64::from($b))
    };
    ($w:ident, $c:literal, $f:ident, rel($b:ident)) => {
        $w.i($c, i64::from($f) - i64::from($b))
    };
    ($w:ident, $c:literal, $f:ident, pid_of($b:ident)) => {
        $w.pid_of($c, $b, $f)
    };
    ($w:ident, $c:literal, $f:ident, bias($n:literal)) => {
        $w.i($c, i64::from($f) - $n)
    };
    ($w:ident, $c:literal, $f:ident, guess($e:expr)) => {
        $w.i($c, $f.wrapping_sub($e))
    };
    ($w:ident, $c:literal, $f:ident, f64) => {
        $w.f64($c, $f)
    };
    // plain, dur, tid, pid
    ($w:ident, $c:literal, $f:ident, $plain:ident) => {
        $w.u($c, $crate::declare::FieldValue::to_col($f))
    };
}

/// The decoder side of one field.
macro_rules! dec_field {
    ($r:ident, $c:literal, $t:ty, ts) => {
        $r.ts($c)?
    };
    ($r:ident, $c:literal, $t:ty, ts_end($d:ident)) => {
        $r.ts($c)?.wrapping_sub($d)
    };
    ($r:ident, $c:literal, $t:ty, since($b:ident)) => {{
        let v = $r.u($c)?;
        if v == 0 {
            0
        } else {
            $b.wrapping_sub(v - 1)
        }
    }};
    ($r:ident, $c:literal, $t:ty, thread) => {
        $r.thread($c)?
    };
    ($r:ident, $c:literal, $t:ty, tid) => {
        $r.tid($c)?
    };
    ($r:ident, $c:literal, $t:ty, str) => {
        $r.s($c)?
    };
    ($r:ident, $c:literal, $t:ty, path) => {
        $r.path($c)?
    };
    ($r:ident, $c:literal, $t:ty, fd) => {
        $r.fd($c)?
    };
    ($r:ident, $c:literal, $t:ty, seq($slot:literal, $e:expr)) => {
        <$t as $crate::declare::FieldValue>::from_col($r.seq($c, $slot)?).ok_or($crate::codec::Bad::Range($c))?
    };
    ($r:ident, $c:literal, $t:ty, less($b:ident)) => {
        ($b as i64).wrapping_sub($r.i($c)?)
    };
    ($r:ident, $c:literal, $t:ty, tid_of($b:ident)) => {
        $r.rel::<$t>($c, i64::from($b))?
    };
    ($r:ident, $c:literal, $t:ty, rel($b:ident)) => {
        $r.rel::<$t>($c, i64::from($b))?
    };
    ($r:ident, $c:literal, $t:ty, pid_of($b:ident)) => {
        $r.pid_of($c, $b)?
    };
    ($r:ident, $c:literal, $t:ty, bias($n:literal)) => {
        $r.rel::<$t>($c, $n)?
    };
    ($r:ident, $c:literal, $t:ty, guess($e:expr)) => {
        $r.i($c)?.wrapping_add($e)
    };
    ($r:ident, $c:literal, $t:ty, f64) => {
        $r.f64($c)?
    };
    ($r:ident, $c:literal, $t:ty, $plain:ident) => {
        $r.narrow::<$t>($c)?
    };
}

/// What a field adds to where its thread's next record is predicted.
macro_rules! span_of {
    ($f:ident, dur) => {
        $f
    };
    ($f:ident, $($enc:tt)*) => {
        0u64
    };
}

/// The prediction a field leaves for the thread's next record.
macro_rules! after_field {
    ($x:ident, seq($slot:literal, $e:expr)) => {
        $x.set_seq($slot, $e)
    };
    ($x:ident, $($enc:tt)*) => {};
}

macro_rules! role_pid {
    ($g:ident, $r:ident . $f:ident, pid) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, pid_of $a:tt) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, thread) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, tid) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, tid_of $a:tt) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, $($enc:tt)*) => {};
}

macro_rules! role_str {
    ($g:ident, $r:ident . $f:ident, str) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, path) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, $($enc:tt)*) => {};
}

macro_rules! role_time {
    ($g:ident, $r:ident . $f:ident, ts) => {
        $r.$f = $g($r.$f)
    };
    ($g:ident, $r:ident . $f:ident, ts_end $a:tt) => {
        $r.$f = $g($r.$f)
    };
    // 0: none.
    ($g:ident, $r:ident . $f:ident, since $a:tt) => {
        if $r.$f != 0 {
            $r.$f = $g($r.$f)
        }
    };
    ($g:ident, $r:ident . $f:ident, $($enc:tt)*) => {};
}

/// A duration after its record's times were rounded: from where the
/// rounded record had got to (`from`) to its own rounded end (`at`, the
/// time it ended as measured).
macro_rules! role_dur {
    ($r:ident . $f:ident, $at:ident, $from:ident, $round:ident, dur) => {{
        $at = $at.saturating_add($r.$f);
        let to = $round($at);
        $r.$f = to.saturating_sub($from);
        $from = to;
    }};
    ($r:ident . $f:ident, $at:ident, $from:ident, $round:ident, $($enc:tt)*) => {};
}

/// A field's value from a column value (`Record::build`).
macro_rules! build_value {
    ($v:expr, $t:ty, f64) => {
        f64::from_bits($v)
    };
    ($v:expr, $t:ty, $($enc:tt)*) => {
        <$t as $crate::declare::FieldValue>::from_col($v).unwrap_or_default()
    };
}

macro_rules! visit_value {
    ($f:expr, ts) => {
        $crate::declare::Value::Time($f)
    };
    ($f:expr, ts_end $a:tt) => {
        $crate::declare::Value::Time($f)
    };
    ($f:expr, since $a:tt) => {
        $crate::declare::Value::Time($f)
    };
    ($f:expr, f64) => {
        $crate::declare::Value::F64($f)
    };
    ($f:expr, $($enc:tt)*) => {
        $crate::declare::FieldValue::value($f)
    };
}

/// Declares the record kinds: see the module docs.
/// A kind's owner: its own rule, or its `pid` field (its thread's pid, or
/// the process it is about).
macro_rules! owner_of {
    ($s:expr, [$o:ident => $e:expr], $(($f:ident, $enc:ident)),+) => {{
        let $o = $s;
        $e
    }};
    ($s:expr, [], $(($f:ident, $enc:ident)),+) => {{
        let r = $s;
        None $( .or(owner_field!(r, $f, $enc)) )+
    }};
}

macro_rules! owner_field {
    ($r:ident, pid, pid_of) => {
        Some($r.pid)
    };
    ($r:ident, pid, pid) => {
        Some($r.pid)
    };
    ($r:ident, $f:ident, $enc:ident) => {
        None
    };
}

macro_rules! records {
    ($(
        $(#[$m:meta])*
        $code:literal $kind:ident $name:literal table $table:literal $( owner($or:ident => $oe:expr) )? $( [$class:ident] )? {
            $(
                $(#[$fm:meta])*
                $c:literal $f:ident : $t:ty = $enc:ident $( ( $($arg:tt)* ) )?
            ),+ $(,)?
        }
    )+) => {
        $(
            $(#[$m])*
            #[derive(Clone, Copy, Debug, PartialEq, Default)]
            pub struct $kind {
                $( $(#[$fm])* pub $f: $t, )+
            }

            impl $kind {
                /// The kind's code in the log.
                pub const CODE: u8 = $code;
                /// The kind's name (`dump` prints it).
                pub const NAME: &'static str = $name;
                /// The Parquet table its rows go to: one made from these
                /// fields unless the exporter writes that table by hand.
                pub const TABLE: &'static str = $table;
                /// The fields, in declaration order.
                pub const FIELDS: &'static [&'static str] = &[$(stringify!($f)),+];
                /// Each field's column, in declaration order.
                pub const COLUMNS: &'static [u8] = &[$($c),+];

                #[allow(unused_variables, clippy::unnecessary_cast)]
                #[inline]
                fn encode(&self, w: &mut $crate::codec::W<'_>) {
                    let $kind { $($f),+ } = *self;
                    $( enc_field!(w, $c, $f, $enc $( ( $($arg)* ) )?); )+
                    $( after_field!(w, $enc $( ( $($arg)* ) )?); )+
                }

                /// Decodes one into `out`, in place: a record moved through
                /// the `Result`s and `Option`s of a return is copied each
                /// time (four 140-byte copies a record, a fifth of `stats`).
                #[allow(unused_variables, clippy::unnecessary_cast)]
                #[inline]
                fn decode_into(r: &mut $crate::codec::R<'_>, out: &mut Record) -> Result<(), $crate::codec::Bad> {
                    $( let $f: $t = dec_field!(r, $c, $t, $enc $( ( $($arg)* ) )?); )+
                    $( after_field!(r, $enc $( ( $($arg)* ) )?); )+
                    *out = Record::$kind($kind { $($f),+ });
                    Ok(())
                }

                /// The process the record is about: its `pid` field, unless
                /// the kind says otherwise (`owner(r => ...)`); `None` for
                /// the machine's or the run's own records.
                #[allow(unused_variables)]
                pub fn owner(&self) -> Option<u32> {
                    owner_of!(self, [$( $or => $oe )?], $( ($f, $enc) ),+)
                }

                /// Calls `v` on every field, with its name.
                pub fn visit(&self, v: &mut dyn FnMut(&'static str, $crate::declare::Value)) {
                    $( v(stringify!($f), visit_value!(self.$f, $enc $( ( $($arg)* ) )?)); )+
                }

                #[allow(unused_variables, unused_mut)]
                fn map_pids(&mut self, mut g: impl FnMut(u32) -> u32) {
                    let r = self;
                    $( role_pid!(g, r.$f, $enc $( ( $($arg)* ) )?); )+
                }

                #[allow(unused_variables, unused_mut)]
                fn map_strs(&mut self, mut g: impl FnMut(StrId) -> StrId) {
                    let r = self;
                    $( role_str!(g, r.$f, $enc $( ( $($arg)* ) )?); )+
                }

                #[allow(unused_variables, unused_mut)]
                fn map_times(&mut self, mut g: impl FnMut(u64) -> u64) {
                    let r = self;
                    $( role_time!(g, r.$f, $enc $( ( $($arg)* ) )?); )+
                }

                #[allow(unused_variables, unused_mut, unused_assignments)]
                fn round_times(&mut self, q: u64) {
                    let round = |t: u64| t.saturating_add(q / 2) / q * q;
                    let mut at = self.ts;
                    self.map_times(round);
                    let mut from = self.ts;
                    let r = self;
                    $( role_dur!(r.$f, at, from, round, $enc $( ( $($arg)* ) )?); )+
                }

                /// A record from its fields' column values, by field name
                /// (a value that does not fit its field is the default):
                /// for generic tools and tests that cover every kind.
                pub fn build(mut value: impl FnMut(&'static str) -> u64) -> Self {
                    $kind { $( $f: build_value!(value(stringify!($f)), $t, $enc $( ( $($arg)* ) )?), )+ }
                }

                /// `ts` plus the record's duration, if it has one.
                #[allow(unused_variables)]
                #[inline]
                pub fn span_end(&self) -> u64 {
                    let $kind { $($f),+ } = *self;
                    let mut end = self.ts;
                    $( end = end.saturating_add(span_of!($f, $enc $( ( $($arg)* ) )?)); )+
                    end
                }
            }

            impl $crate::declare::Encode for $kind {
                #[inline]
                fn code(&self) -> u8 {
                    Self::CODE
                }
                #[inline]
                fn ts(&self) -> u64 {
                    self.ts
                }
                #[inline]
                fn span_end(&self) -> u64 {
                    $kind::span_end(self)
                }
                #[inline]
                fn round_times(&mut self, q: u64) {
                    $kind::round_times(self, q)
                }
                #[inline]
                fn encode(&self, w: &mut $crate::codec::W<'_>) {
                    $kind::encode(self, w)
                }
            }
        )+

        /// One log record.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Record {
            $( $kind($kind), )+
        }

        /// Record kind codes, as stored in a frame's kind column. Never reuse one.
        pub(crate) const KNOWN_KINDS: &[u8] = &[$($code),+];

        /// Calls the macro given with every kind in declaration order, each
        /// with its class (`Io [call]`, `Fork []`): a reader's types that
        /// name every kind are made from the declaration (the model's
        /// `Call` and `NotCall`).
        #[macro_export]
        macro_rules! with_kinds {
            ($reader_macro:ident) => { $reader_macro! { $( $kind [$($class)?] ),+ } };
        }

        /// What a reader does with records of kind `K`, in the module
        /// about `K` (stats' metadata table takes the metadata calls): the
        /// reader's list of kinds is this trait's impls, and
        /// [`Record::send_to`] the one dispatch.
        pub trait Accept<K> {
            /// `r`, which is `rec`'s, read from frame `f`.
            fn accept(&mut self, f: &$crate::Frame<'_>, rec: &Record, r: K);
        }

        /// A reader of every kind: a kind it has no [`Accept`] impl for does
        /// not compile (one that does nothing with it says so in an impl).
        pub trait AcceptAll: $( Accept<$kind> + )+ {}
        impl<T: $( Accept<$kind> + )+> AcceptAll for T {}

        impl Record {
            /// Every kind's code, in declaration order.
            pub const CODES: &'static [u8] = KNOWN_KINDS;
            /// Every kind's code and Parquet table, in declaration order.
            pub const TABLES: &'static [(u8, &'static str)] = &[$(($code, $table)),+];

            /// A record of kind `code` from its fields' column values (see
            /// the kinds' `build`); `None` for a code no kind has.
            pub fn build(code: u8, value: impl FnMut(&'static str) -> u64) -> Option<Record> {
                Some(match code {
                    $( $code => Record::$kind($kind::build(value)), )+
                    _ => return None,
                })
            }

            pub fn ts(&self) -> u64 {
                match self { $( Record::$kind(r) => r.ts, )+ }
            }

            /// Hands the record to `to`'s [`Accept`] impl for its kind.
            #[inline]
            pub fn send_to<T: AcceptAll>(&self, f: &$crate::Frame<'_>, to: &mut T) {
                match *self { $( Record::$kind(r) => Accept::<$kind>::accept(to, f, self, r), )+ }
            }

            /// The kind's name (`io`, `sched_switch`).
            pub fn kind_name(&self) -> &'static str {
                match self { $( Record::$kind(_) => $kind::NAME, )+ }
            }

            /// The kind's fields and their columns, in declaration order.
            pub fn fields(&self) -> (&'static [&'static str], &'static [u8]) {
                match self { $( Record::$kind(_) => ($kind::FIELDS, $kind::COLUMNS), )+ }
            }

            /// The process the record is about (see the kinds' `owner`).
            pub fn owner(&self) -> Option<u32> {
                match self { $( Record::$kind(r) => r.owner(), )+ }
            }

            /// The kind's Parquet table (see the kinds' `TABLE`).
            pub fn table(&self) -> &'static str {
                match self { $( Record::$kind(_) => $kind::TABLE, )+ }
            }

            /// The kind's code in the log.
            pub fn code(&self) -> u8 {
                match self { $( Record::$kind(_) => $kind::CODE, )+ }
            }

            /// Calls `v` on every field, with its name, in declaration order.
            pub fn visit(&self, v: &mut dyn FnMut(&'static str, $crate::declare::Value)) {
                match self { $( Record::$kind(r) => r.visit(v), )+ }
            }

            /// Calls `f` on every pid and tid field.
            pub fn map_pids(&mut self, f: impl FnMut(u32) -> u32) {
                match self { $( Record::$kind(r) => r.map_pids(f), )+ }
            }

            /// Calls `f` on every string field (to move a record between frames).
            pub fn map_strs(&mut self, f: impl FnMut(StrId) -> StrId) {
                match self { $( Record::$kind(r) => r.map_strs(f), )+ }
            }

            /// Calls `f` on every time field (`ts`, and times it refers to).
            pub fn map_times(&mut self, f: impl FnMut(u64) -> u64) {
                match self { $( Record::$kind(r) => r.map_times(f), )+ }
            }

            fn span_end(&self) -> u64 {
                match self { $( Record::$kind(r) => r.span_end(), )+ }
            }

            /// Rounds every time to the nearest multiple of `q` ns, and a
            /// call's end too (its duration is then the rounded end less
            /// the rounded start): `record --time-resolution`. Rounding
            /// keeps order: times that were ordered stay ordered or become
            /// equal. `q` of 0 or 1 changes nothing.
            pub fn round_times(&mut self, q: u64) {
                if q > 1 {
                    match self { $( Record::$kind(r) => r.round_times(q), )+ }
                }
            }

            #[inline]
            pub(crate) fn encode(&self, w: &mut $crate::codec::W<'_>) {
                match self { $( Record::$kind(r) => r.encode(w), )+ }
            }

            /// Pushes the kind's struct, not the enum (the decoders' way).
            #[cfg(test)]
            pub(crate) fn push_as_kind(&self, enc: &mut $crate::FrameEncoder) {
                match self { $( Record::$kind(r) => enc.push(r), )+ }
            }

            /// Decodes a record of kind `code` (one of [`KNOWN_KINDS`]) into
            /// `out`; `None` for a code no kind has.
            #[inline]
            pub(crate) fn decode_into(
                code: u8,
                r: &mut $crate::codec::R<'_>,
                out: &mut Record,
            ) -> Option<Result<(), $crate::codec::Bad>> {
                Some(match code {
                    $( $code => $kind::decode_into(r, out), )+
                    _ => return None,
                })
            }
        }
    };
}
