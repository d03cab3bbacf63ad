import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { context, propagation, type Span, SpanKind, trace } from '@opentelemetry/api';
import type { NextFunction, Request, Response } from 'express';
import type { WebSocketServer } from 'ws';
import type { Deps } from '../deps.js';
import { DomainError } from '../errors.js';
import { type Logger, redactUrl } from '../log.js';
import { failSpan, tracer } from './tracing.js';

/** The header carrying a request id in and out (what proxies and log pipelines already use). */
const REQUEST_ID_HEADER = 'x-request-id';

/** A caller's request id is kept only when it is short and plain, so it cannot forge log lines. */
const ACCEPTABLE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

declare module 'express-serve-static-core' {
  interface Locals {
    /** This request's id, also in the `X-Request-Id` response header and every log line about it. */
    requestId?: string;
  }
}

/**
 * The route pattern a request matched (`/agent/data/get`, `/graphql`), for metric labels and
 * span names: never the raw URL, which may carry a `token` query parameter or an id.
 */
export function routeOf(req: Request, status: number): string {
  const route = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof route === 'string') return `${req.baseUrl}${route}`;
  if (req.baseUrl) return req.baseUrl;
  return status === 404 ? 'unmatched' : 'other';
}

/**
 * The first middleware: gives every request an id (the caller's `X-Request-Id` when acceptable,
 * else a new UUID) and returns it; when the response is sent, writes one JSON log line
 * (redacted URL, no header), observes the latency histogram and, with OTEL_ENABLED, ends the
 * request's server span.
 */
export function requestObservability(deps: Pick<Deps, 'metrics' | 'config'>, log: Logger) {
  const tracing = deps.config.otelEnabled;
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const given = req.headers[REQUEST_ID_HEADER];
    const requestId = typeof given === 'string' && ACCEPTABLE_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);

    let span: Span | undefined;
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeOf(req, res.statusCode);
      deps.metrics.httpRequest(req.method, route, res.statusCode, seconds);
      if (span) {
        span.updateName(`${req.method} ${route}`);
        span.setAttributes({ 'http.route': route, 'http.response.status_code': res.statusCode });
        if (res.statusCode >= 500) failSpan(span, new Error(`HTTP ${res.statusCode}`));
        span.end();
      }
      log.info(
        {
          reqId: requestId,
          method: req.method,
          url: redactUrl(req.originalUrl),
          route,
          status: res.statusCode,
          ms: Math.round(seconds * 1e6) / 1e3,
        },
        'request',
      );
    });

    if (!tracing) return next();
    // Continue the caller's trace when it sent a `traceparent` (and a propagator is registered).
    const parent = propagation.extract(context.active(), req.headers);
    span = tracer().startSpan(
      req.method,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': req.method, 'parley.request_id': requestId },
      },
      parent,
    );
    context.with(trace.setSpan(parent, span), next);
  };
}

/**
 * Mounted on /metrics before its route: with METRICS_TOKEN the scrape needs
 * `Authorization: Bearer <token>` (compared in constant time), and in production without a token
 * /metrics is not served at all, so the public port never shows it by default. Refused scrapes
 * get the same 404 as an absent route.
 */
export function metricsGuard(config: Pick<Deps['config'], 'env' | 'hardening'>) {
  const token = config.hardening.metricsToken;
  const expected = token ? createHash('sha256').update(`Bearer ${token}`).digest() : undefined;
  return (req: Request, _res: Response, next: NextFunction) => {
    if (!expected) return next(config.env === 'production' ? new DomainError('NOT_FOUND', 'Not found') : undefined);
    const given = createHash('sha256')
      .update(String(req.headers.authorization ?? ''))
      .digest();
    next(timingSafeEqual(given, expected) ? undefined : new DomainError('NOT_FOUND', 'Not found'));
  };
}

/** Keeps `parley_websocket_connections` in step with the sockets of a WebSocket server. */
export function countSockets(wss: WebSocketServer, metrics: Pick<Deps['metrics'], 'socketOpened' | 'socketClosed'>) {
  wss.on('connection', (socket) => {
    metrics.socketOpened();
    socket.once('close', () => metrics.socketClosed());
  });
}
