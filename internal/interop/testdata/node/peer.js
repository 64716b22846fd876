// The grpc-js peer of otlpgate's interop tests (internal/interop). Run with one JSON argument:
//
//   node peer.js '{"mode":"client","target":"127.0.0.1:4317","calls":[...]}'
//     sends each call in order on one channel and prints one JSON line per call:
//     {"call":i,"ok":true} or {"call":i,"ok":false,"code":N,"details":"..."}; exits 1 if any failed.
//     A call is {"signal":"traces","first":F,"count":N,"pad":P} (N spans whose span ids are
//     F..F+N-1 big-endian, each with a string attribute of P bytes), {"signal":"metrics",
//     "names":[...]} (one gauge per name) or {"signal":"logs","bodies":[...]}.
//     Options: "ca" (a PEM file: TLS, trusting it), "compression" ("gzip", "deflate" or none),
//     "gap" (milliseconds to wait between calls), "parallel" (true: every call at once, each
//     line as its answer comes), "otep" ("unary" or "stream": the calls go to
//     otlpgate's OTEP services instead, see clientOTEP).
//
//   node peer.js '{"mode":"server"}'
//     serves the three OTLP v1 Export services, and otlpgate's OTEP UnaryExporter and
//     StreamExporter (each request answered Success with its id, "otep" in its line), on 127.0.0.1 (TLS with "cert" and "key"), prints
//     {"listening":"127.0.0.1:PORT"} once bound, then {"signal":"traces","encoding":"gzip"} for
//     each request's headers and {"signal":"traces","ids":["<span id hex>",...]} for each
//     request as it decoded it (metric names for metrics, log bodies for logs), and answers
//     each with an empty response. It stops on SIGTERM, or when stdin closes. Options: "cert"
//     and "key" (PEM files: TLS), "shrink" and "goaway" (see watchStreams).
//
// The messages are encoded and decoded by protobufjs from the repository's proto/ files, through
// @grpc/proto-loader: a second implementation of OTLP's encoding next to otlpgate's.
'use strict';

const path = require('path');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const protoRoot = path.resolve(__dirname, '../../../../proto');
const files = {
  traces: 'opentelemetry/proto/collector/trace/v1/trace_service.proto',
  metrics: 'opentelemetry/proto/collector/metrics/v1/metrics_service.proto',
  logs: 'opentelemetry/proto/collector/logs/v1/logs_service.proto',
  otep: 'otep/v1/otep.proto',
};
// otlpgate's OTEP services: the same signals, each request with an id its answer echoes.
const otepMethods = { ExportTraces: 'traces', ExportMetrics: 'metrics', ExportLogs: 'logs' };
const services = {
  traces: ['opentelemetry', 'proto', 'collector', 'trace', 'v1', 'TraceService'],
  metrics: ['opentelemetry', 'proto', 'collector', 'metrics', 'v1', 'MetricsService'],
  logs: ['opentelemetry', 'proto', 'collector', 'logs', 'v1', 'LogsService'],
};

const defs = protoLoader.loadSync(Object.values(files), {
  keepCase: true, longs: String, enums: String, defaults: false, oneofs: true, includeDirs: [protoRoot],
});
const pkg = grpc.loadPackageDefinition(defs);
const service = (signal) => services[signal].reduce((o, k) => o[k], pkg);

const maxMsg = 64 << 20;
const opts = JSON.parse(process.argv[2] || '{}');
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

function spanID(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

function request(c) {
  switch (c.signal) {
    case 'traces': {
      const spans = [];
      for (let i = 0; i < c.count; i++) {
        const id = c.first + i;
        spans.push({
          trace_id: Buffer.concat([Buffer.alloc(8), spanID(id)]), span_id: spanID(id), name: 'grpc-js-' + id,
          kind: 'SPAN_KIND_CLIENT', start_time_unix_nano: '1700000000000000000', end_time_unix_nano: '1700000000000001000',
          attributes: [{ key: 'pad', value: { string_value: 'x'.repeat(c.pad || 0) } }],
        });
      }
      return {
        resource_spans: [{
          resource: { attributes: [{ key: 'service.name', value: { string_value: 'grpc-js' } }] },
          scope_spans: [{ scope: { name: 'interop' }, spans }],
        }],
      };
    }
    case 'metrics':
      return {
        resource_metrics: [{
          resource: { attributes: [{ key: 'service.name', value: { string_value: 'grpc-js' } }] },
          scope_metrics: [{
            metrics: c.names.map((name, i) => ({
              name, gauge: { data_points: [{ time_unix_nano: '1700000000000000000', as_int: String(i + 1) }] },
            })),
          }],
        }],
      };
    case 'logs':
      return {
        resource_logs: [{
          scope_logs: [{
            log_records: c.bodies.map((b) => ({ time_unix_nano: '1700000000000000000', body: { string_value: b } })),
          }],
        }],
      };
  }
  throw new Error('unknown signal ' + c.signal);
}

const otepMethod = { traces: 'ExportTraces', metrics: 'ExportMetrics', logs: 'ExportLogs' };

// otepRequest is the OTEP form of call c: its v1 resource entries under the OTEP field name,
// with id.
function otepRequest(c, id) {
  const r = request(c);
  return { id: String(id), resourceSpans: r.resource_spans, resourceMetrics: r.resource_metrics, resourceLogs: r.resource_logs };
}

// clientOTEP sends the calls to otlpgate's OTEP services: with "otep":"unary" one
// UnaryExporter call each, with "otep":"stream" one StreamExporter stream per signal carrying
// that signal's calls, their answers matched by id. A call is ok when its answer is Success
// with its id.
async function clientOTEP(creds, chanOpts) {
  const otep = pkg.otlpgate.otep.v1;
  let failed = false;
  const report = (i, err, resp) => {
    if (err) {
      failed = true;
      out({ call: i, ok: false, code: err.code, details: err.details });
    } else if ((resp.result_code || 'Success') !== 'Success' || resp.id !== String(i + 1)) {
      failed = true;
      out({ call: i, ok: false, code: -1, details: 'answer ' + JSON.stringify(resp) });
    } else {
      out({ call: i, ok: true });
    }
  };
  if (opts.otep === 'unary') {
    const c = new otep.UnaryExporter(opts.target, creds, chanOpts);
    for (const [i, call] of opts.calls.entries()) {
      await new Promise((resolve) => {
        c[otepMethod[call.signal]](otepRequest(call, i + 1), { deadline: Date.now() + 20000 }, (err, resp) => {
          report(i, err, resp);
          resolve();
        });
      });
    }
    c.close();
  } else {
    const c = new otep.StreamExporter(opts.target, creds, chanOpts);
    for (const signal of Object.keys(otepMethod)) {
      const mine = [...opts.calls.entries()].filter(([, call]) => call.signal === signal);
      if (mine.length === 0) continue;
      await new Promise((resolve) => {
        const pending = new Set(mine.map(([i]) => i));
        const st = c[otepMethod[signal]]({ deadline: Date.now() + 20000 });
        st.on('data', (resp) => {
          const i = Number(resp.id) - 1;
          if (pending.delete(i)) report(i, null, resp);
          if (pending.size === 0) st.end();
        });
        st.on('error', (err) => {
          for (const i of pending) report(i, err);
          pending.clear();
          resolve();
        });
        st.on('end', () => {
          for (const i of pending) report(i, { code: -1, details: 'stream ended unanswered' });
          resolve();
        });
        st.on('status', () => {});
        for (const [i, call] of mine) st.write(otepRequest(call, i + 1));
      });
    }
    c.close();
  }
  process.exitCode = failed ? 1 : 0;
}

async function client() {
  const creds = opts.ca ? grpc.credentials.createSsl(fs.readFileSync(opts.ca)) : grpc.credentials.createInsecure();
  const alg = { deflate: 1, gzip: 2 }[opts.compression] || 0;
  const chanOpts = { 'grpc.max_send_message_length': maxMsg, 'grpc.max_receive_message_length': maxMsg, 'grpc.default_compression_algorithm': alg };
  if (opts.otep) return clientOTEP(creds, chanOpts);
  const clients = {};
  let failed = false;
  const one = async (i, c) => {
    const Svc = service(c.signal);
    clients[c.signal] = clients[c.signal] || new Svc(opts.target, creds, chanOpts);
    const res = await new Promise((resolve) => {
      clients[c.signal].Export(request(c), { deadline: Date.now() + 20000 }, (err) => resolve(err));
    });
    if (res) {
      failed = true;
      out({ call: i, ok: false, code: res.code, details: res.details });
    } else {
      out({ call: i, ok: true });
    }
  };
  if (opts.parallel) {
    await Promise.all([...opts.calls.entries()].map(([i, c]) => one(i, c)));
  } else {
    for (const [i, c] of opts.calls.entries()) {
      if (i > 0 && opts.gap) await new Promise((r) => setTimeout(r, opts.gap));
      await one(i, c);
    }
  }
  for (const c of Object.values(clients)) c.close();
  process.exitCode = failed ? 1 : 0;
}

// watchStreams reports the grpc-encoding of every request stream the server's HTTP/2 sessions
// open (grpc-js keeps it from the handlers), and applies the session options of opts: shrink
// (as the first stream of a session arrives, a SETTINGS lowering INITIAL_WINDOW_SIZE to that
// many bytes while the stream's message is still arriving) and goaway (as the goaway-th stream
// of a session arrives, a GOAWAY naming it the last stream processed). It sits between node's
// HTTP/2 server and grpc-js: a stream above a GOAWAY's last stream id that nghttp2 still took
// in (its HEADERS read before the GOAWAY was written) is reset with REFUSED_STREAM, unseen by
// grpc-js, so that the peer never processes a stream its GOAWAY said it would not.
function watchStreams() {
  const http2 = require('http2');
  const paths = {};
  for (const [signal, parts] of Object.entries(services)) paths['/' + parts.join('.') + '/Export'] = signal;
  for (const svc of ['UnaryExporter', 'StreamExporter']) {
    for (const [m, signal] of Object.entries(otepMethods)) paths['/otlpgate.otep.v1.' + svc + '/' + m] = signal;
  }
  const sessions = new WeakMap();
  for (const create of ['createServer', 'createSecureServer']) {
    const orig = http2[create];
    http2[create] = function (...args) {
      const s = orig.apply(this, args);
      const emit = s.emit;
      s.emit = function (event, ...rest) {
        if (event !== 'stream') return emit.call(this, event, ...rest);
        const [stream, headers] = rest;
        const session = stream.session;
        let st = sessions.get(session);
        if (!st) {
          st = { streams: 0, last: 0 };
          sessions.set(session, st);
        }
        if (st.last && stream.id > st.last) {
          out({ refused: stream.id });
          stream.on('error', () => {});
          stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
          return true;
        }
        st.streams++;
        out({ signal: paths[headers[':path']] || headers[':path'], encoding: headers['grpc-encoding'] || 'identity' });
        if (opts.shrink && st.streams === 1) session.settings({ initialWindowSize: opts.shrink });
        if (opts.goaway && st.streams === opts.goaway) {
          st.last = stream.id;
          out({ goaway: stream.id });
          session.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
        }
        return emit.call(this, event, ...rest);
      };
      return s;
    };
  }
}

// decoded is what a test compares of a request of signal, v1 or OTEP: span ids in hex, metric
// names or log bodies.
function decoded(signal, req) {
  const ids = [];
  if (signal === 'traces') {
    for (const rs of req.resource_spans || req.resourceSpans || []) for (const ss of rs.scope_spans || []) for (const sp of ss.spans || []) ids.push(Buffer.from(sp.span_id).toString('hex'));
  } else if (signal === 'metrics') {
    for (const rm of req.resource_metrics || req.resourceMetrics || []) for (const sm of rm.scope_metrics || []) for (const m of sm.metrics || []) ids.push(m.name);
  } else {
    for (const rl of req.resource_logs || req.resourceLogs || []) for (const sl of rl.scope_logs || []) for (const r of sl.log_records || []) ids.push(r.body.string_value);
  }
  return ids;
}

function server() {
  watchStreams();
  const srv = new grpc.Server({ 'grpc.max_receive_message_length': maxMsg });
  for (const signal of Object.keys(services)) {
    srv.addService(service(signal).service, {
      Export: (call, cb) => {
        out({ signal, ids: decoded(signal, call.request) });
        cb(null, {});
      },
    });
  }
  // OTEP, unary and streamed: each request answered Success with its id.
  const otep = pkg.otlpgate.otep.v1;
  const unary = {};
  const streams = {};
  for (const [m, signal] of Object.entries(otepMethods)) {
    unary[m] = (call, cb) => {
      out({ signal, otep: 'unary', ids: decoded(signal, call.request) });
      cb(null, { id: call.request.id, result_code: 'Success' });
    };
    streams[m] = (call) => {
      call.on('data', (req) => {
        out({ signal, otep: 'stream', ids: decoded(signal, req) });
        call.write({ id: req.id, result_code: 'Success' });
      });
      call.on('end', () => call.end());
      call.on('error', () => {});
    };
  }
  srv.addService(otep.UnaryExporter.service, unary);
  srv.addService(otep.StreamExporter.service, streams);
  const creds = opts.cert
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: fs.readFileSync(opts.cert), private_key: fs.readFileSync(opts.key) }], false)
    : grpc.ServerCredentials.createInsecure();
  srv.bindAsync('127.0.0.1:0', creds, (err, port) => {
    if (err) {
      process.stderr.write(String(err) + '\n');
      process.exit(1);
    }
    out({ listening: '127.0.0.1:' + port });
  });
  const stop = () => srv.tryShutdown(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
}

if (opts.mode === 'client') {
  client().catch((e) => {
    process.stderr.write(String(e && e.stack || e) + '\n');
    process.exit(2);
  });
} else if (opts.mode === 'server') {
  server();
} else {
  process.stderr.write('mode must be client or server\n');
  process.exit(2);
}
