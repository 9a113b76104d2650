"""An OTLP/HTTP metrics receiver for the tests: decodes each POST with
OpenTelemetry's published protos (the opentelemetry-proto package) and
appends it to OUT as one JSON line: the resource's attributes, and each
metric's name, unit, kind and points (attributes, value). Prints its port
once listening.

otlp_receiver.py OUT"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest


def attrs(kvs):
    return {kv.key: kv.value.string_value for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        req = ExportMetricsServiceRequest()
        req.ParseFromString(body)
        for rm in req.resource_metrics:
            out = {"path": self.path, "content_type": self.headers["Content-Type"],
                   "resource": attrs(rm.resource.attributes), "metrics": []}
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    if kind == "histogram":
                        points = [{"attrs": attrs(p.attributes), "count": p.count, "sum": p.sum,
                                   "buckets": list(p.bucket_counts), "bounds": list(p.explicit_bounds)}
                                  for p in m.histogram.data_points]
                    else:
                        data = getattr(m, kind)
                        points = [{"attrs": attrs(p.attributes), "value": p.as_double,
                                   "start": p.start_time_unix_nano, "time": p.time_unix_nano}
                                  for p in data.data_points]
                    out["metrics"].append({"name": m.name, "unit": m.unit, "kind": kind, "points": points})
            with open(sys.argv[1], "a") as f:
                f.write(json.dumps(out) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
