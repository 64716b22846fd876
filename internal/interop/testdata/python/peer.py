"""The Python grpcio peer of otlpgate's interop tests (internal/interop).

Run with Debian's /usr/bin/python3 (python3-grpcio, the gRPC C-core, and python3-protobuf) and
one JSON argument, the options of testdata/node/peer.js, with "descriptors" added: a file
holding a FileDescriptorSet of the OTLP protos, dependencies first, which the test writes from
otlpgate's generated code. The message classes are built from it at run time, so that no
generated Python is needed; grpcio's generic calls and handlers carry their bytes.

  client: sends each call in order, prints {"call":i,"ok":true} or {"call":i,"ok":false,
          "code":N,"details":"..."} per call, exits 1 if any failed.
  server: serves the three OTLP v1 Export services and otlpgate's OTEP UnaryExporter and
          StreamExporter on 127.0.0.1, prints {"listening":...}, then {"signal":...,"ids":[...]}
          per request as it decoded it (span ids in hex, metric names, log bodies; for OTEP
          also "otep" ("unary" or "stream") and "request", its id), answers a v1 request with
          an empty response and an OTEP one Success with its id, and stops when stdin closes.
          With "max_age_ms", the C-core sends GOAWAY to connections that old. With
          "reorder_ms", a stream holds each request up to that long for the next one and
          answers such a pair in reverse order, printing "reordered":true on the line of the
          request answered before the earlier one.
"""

import json
import queue
import sys
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

opts = json.loads(sys.argv[1])
_out_lock = threading.Lock()


def out(obj):
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def message_classes(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    get = getattr(message_factory, "GetMessageClass", None)
    factory = None if get else message_factory.MessageFactory(pool)

    def cls(name):
        d = pool.FindMessageTypeByName(name)
        return get(d) if get else factory.GetPrototype(d)

    return cls


cls = message_classes(opts["descriptors"])
SIGNALS = {
    "traces": ("opentelemetry.proto.collector.trace.v1.TraceService", "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
    "metrics": ("opentelemetry.proto.collector.metrics.v1.MetricsService", "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest"),
    "logs": ("opentelemetry.proto.collector.logs.v1.LogsService", "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest"),
}
REQUEST = {s: cls(m) for s, (_, m) in SIGNALS.items()}
MAX_MSG = 64 << 20
CHANNEL_OPTIONS = [("grpc.max_send_message_length", MAX_MSG), ("grpc.max_receive_message_length", MAX_MSG)]


def request(c):
    req = REQUEST[c["signal"]]()
    if c["signal"] == "traces":
        rs = req.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "grpcio"
        ss = rs.scope_spans.add()
        ss.scope.name = "interop"
        for i in range(c["count"]):
            sid = (c["first"] + i).to_bytes(8, "big")
            sp = ss.spans.add(trace_id=bytes(8) + sid, span_id=sid, name="grpcio-%d" % (c["first"] + i),
                              start_time_unix_nano=1700000000000000000, end_time_unix_nano=1700000000000001000)
            sp.attributes.add(key="pad").value.string_value = "z" * c.get("pad", 0)
    elif c["signal"] == "metrics":
        sm = req.resource_metrics.add().scope_metrics.add()
        for i, name in enumerate(c["names"]):
            m = sm.metrics.add(name=name)
            m.gauge.data_points.add(time_unix_nano=1700000000000000000, as_int=i + 1)
    else:
        sl = req.resource_logs.add().scope_logs.add()
        for body in c["bodies"]:
            sl.log_records.add(time_unix_nano=1700000000000000000).body.string_value = body
    return req


OTEP = {
    "traces": ("ExportTraces", "otlpgate.otep.v1.TraceExportRequest", "resource_spans", "resourceSpans"),
    "metrics": ("ExportMetrics", "otlpgate.otep.v1.MetricExportRequest", "resource_metrics", "resourceMetrics"),
    "logs": ("ExportLogs", "otlpgate.otep.v1.LogExportRequest", "resource_logs", "resourceLogs"),
}


def otep_request(c, rid):
    method, name, v1_field, otep_field = OTEP[c["signal"]]
    req = cls(name)(id=rid)
    getattr(req, otep_field).extend(getattr(request(c), v1_field))
    return req


def client_otep(channel):
    """With "otep":"unary" one UnaryExporter call per call, with "otep":"stream" one
    StreamExporter stream per signal carrying all its calls before any answer is read; a call
    is ok when its answer is Success with its id."""
    response = cls("otlpgate.otep.v1.ExportResponse")
    failed = False

    def report(i, resp=None, err=None):
        nonlocal failed
        if err is not None:
            failed = True
            out({"call": i, "ok": False, "code": err.code().value[0], "details": err.details()})
        elif resp.result_code != 0 or resp.id != i + 1:
            failed = True
            out({"call": i, "ok": False, "code": -1, "details": "answer id %d code %d" % (resp.id, resp.result_code)})
        else:
            out({"call": i, "ok": True})

    if opts["otep"] == "unary":
        for i, c in enumerate(opts["calls"]):
            call = channel.unary_unary("/otlpgate.otep.v1.UnaryExporter/" + OTEP[c["signal"]][0],
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=response.FromString)
            try:
                report(i, resp=call(otep_request(c, i + 1), timeout=20))
            except grpc.RpcError as e:
                report(i, err=e)
    else:
        for signal in OTEP:
            mine = [(i, c) for i, c in enumerate(opts["calls"]) if c["signal"] == signal]
            if not mine:
                continue
            stream = channel.stream_stream("/otlpgate.otep.v1.StreamExporter/" + OTEP[signal][0],
                                           request_serializer=lambda m: m.SerializeToString(),
                                           response_deserializer=response.FromString)
            pending = {i for i, _ in mine}
            try:
                for resp in stream(iter([otep_request(c, i + 1) for i, c in mine]), timeout=20):
                    if resp.id - 1 in pending:
                        pending.discard(resp.id - 1)
                        report(resp.id - 1, resp=resp)
                    if not pending:
                        break
            except grpc.RpcError as e:
                for i in sorted(pending):
                    report(i, err=e)
                pending.clear()
            for i in sorted(pending):
                failed = True
                out({"call": i, "ok": False, "code": -1, "details": "stream ended unanswered"})
    channel.close()
    sys.exit(1 if failed else 0)


def client():
    if opts.get("ca"):
        with open(opts["ca"], "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        channel = grpc.secure_channel(opts["target"], creds, options=CHANNEL_OPTIONS)
    else:
        channel = grpc.insecure_channel(opts["target"], options=CHANNEL_OPTIONS)
    if opts.get("otep"):
        client_otep(channel)
    compression = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(opts.get("compression"), grpc.Compression.NoCompression)
    failed = False

    def export(c):
        return channel.unary_unary("/%s/Export" % SIGNALS[c["signal"]][0],
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=lambda b: b)

    def report(i, call):
        nonlocal failed
        try:
            call()
            out({"call": i, "ok": True})
        except grpc.RpcError as e:
            failed = True
            out({"call": i, "ok": False, "code": e.code().value[0], "details": e.details()})

    if opts.get("parallel"):
        # Every call at once: the futures are in flight together on the channel.
        futs = [export(c).future(request(c), timeout=20, compression=compression) for c in opts["calls"]]
        for i, f in enumerate(futs):
            report(i, f.result)
    else:
        for i, c in enumerate(opts["calls"]):
            if i > 0 and opts.get("gap"):
                time.sleep(opts["gap"] / 1000)
            report(i, lambda: export(c)(request(c), timeout=20, compression=compression))
    channel.close()
    sys.exit(1 if failed else 0)


def decoded(signal, entries):
    """The span ids (hex), metric names or log bodies of a request's resource entries."""
    ids = []
    if signal == "traces":
        for rs in entries:
            for ss in rs.scope_spans:
                ids.extend(sp.span_id.hex() for sp in ss.spans)
    elif signal == "metrics":
        for rm in entries:
            for sm in rm.scope_metrics:
                ids.extend(m.name for m in sm.metrics)
    else:
        for rl in entries:
            for sl in rl.scope_logs:
                ids.extend(r.body.string_value for r in sl.log_records)
    return ids


def handler(signal):
    def export(req, context):
        out({"signal": signal, "ids": decoded(signal, getattr(req, OTEP[signal][2]))})
        return b""

    return grpc.unary_unary_rpc_method_handler(export, request_deserializer=REQUEST[signal].FromString,
                                               response_serializer=lambda b: b)


def otep_handlers():
    """OTEP UnaryExporter and StreamExporter: every request is answered Success with its id."""
    response = cls("otlpgate.otep.v1.ExportResponse")
    unary, streams = {}, {}
    hold = opts.get("reorder_ms", 0) / 1000

    def answer(signal, mode, req, reordered=False):
        line = {"signal": signal, "otep": mode, "request": req.id, "ids": decoded(signal, getattr(req, OTEP[signal][3]))}
        if reordered:
            line["reordered"] = True
        out(line)
        return response(id=req.id, result_code=0)

    def unary_method(signal):
        return lambda req, context: answer(signal, "unary", req)

    def stream_method(signal):
        def export(requests, context):
            # A reader of its own, so that a request can be waited for with a bound while
            # the one before it is held unanswered.
            q = queue.Queue()

            def read():
                try:
                    for req in requests:
                        q.put(req)
                except grpc.RpcError:
                    pass
                q.put(None)

            threading.Thread(target=read, daemon=True).start()
            while True:
                req = q.get()
                if req is None:
                    return
                nxt, ended = None, False
                if hold:
                    try:
                        nxt = q.get(timeout=hold)
                        ended = nxt is None
                    except queue.Empty:
                        pass
                if nxt is not None:
                    yield answer(signal, "stream", nxt, reordered=True)
                yield answer(signal, "stream", req)
                if ended:
                    return

        return export

    for signal, (method, name, _, _) in OTEP.items():
        unary[method] = grpc.unary_unary_rpc_method_handler(unary_method(signal), request_deserializer=cls(name).FromString,
                                                            response_serializer=lambda m: m.SerializeToString())
        streams[method] = grpc.stream_stream_rpc_method_handler(stream_method(signal), request_deserializer=cls(name).FromString,
                                                                response_serializer=lambda m: m.SerializeToString())
    return (grpc.method_handlers_generic_handler("otlpgate.otep.v1.UnaryExporter", unary),
            grpc.method_handlers_generic_handler("otlpgate.otep.v1.StreamExporter", streams))


def server():
    options = list(CHANNEL_OPTIONS)
    if opts.get("max_age_ms"):
        # The C-core's own GOAWAY: connections older than this are sent one, and closed once
        # the grace has passed.
        options += [("grpc.max_connection_age_ms", opts["max_age_ms"]), ("grpc.max_connection_age_grace_ms", 10000)]
    # A stream holds a worker for its life: room for every signal's OTEP streams besides
    # the unary calls.
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=options)
    for signal, (service, _) in SIGNALS.items():
        srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"Export": handler(signal)}),))
    srv.add_generic_rpc_handlers(otep_handlers())
    if opts.get("cert"):
        with open(opts["cert"], "rb") as f:
            cert = f.read()
        with open(opts["key"], "rb") as f:
            key = f.read()
        port = srv.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    out({"listening": "127.0.0.1:%d" % port})
    sys.stdin.read()
    srv.stop(0)


if opts.get("mode") == "client":
    client()
elif opts.get("mode") == "server":
    server()
else:
    sys.stderr.write("mode must be client or server\n")
    sys.exit(2)
