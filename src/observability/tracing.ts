import { type Attributes, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Redis } from 'ioredis';
import type { Database } from '../db/client.js';

/**
 * OpenTelemetry hooks, off unless OTEL_ENABLED is on. Only @opentelemetry/api is used: spans go
 * to whatever tracer provider the process registered (an OpenTelemetry SDK preloaded with
 * `node --import`), and are no-ops when none is. No exporter is bundled.
 */
export const tracer = () => trace.getTracer('parley');

/** Runs `fn` in an active span named `name`, recording a thrown error on it. */
export function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  kind: SpanKind = SpanKind.INTERNAL,
): Promise<T> {
  return tracer().startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

export function failSpan(span: Span, error: unknown) {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : undefined });
}

interface PreparedQuery {
  execute(...args: unknown[]): Promise<unknown>;
}
interface DrizzleSession {
  prepareQuery(query: { sql: string }, ...rest: unknown[]): PreparedQuery;
}

/**
 * A `db.query` span around every statement the drizzle database runs (the statement text with
 * its placeholders, never the parameter values). Drizzle has no hook for this, so the session's
 * `prepareQuery` is wrapped; transactions (a session of their own) are not traced.
 */
export function traceDatabase(database: Database) {
  const session = (database.db as unknown as { session?: DrizzleSession }).session;
  if (!session || typeof session.prepareQuery !== 'function') return;
  const prepare = session.prepareQuery.bind(session);
  const system = database.kind === 'pglite' ? 'pglite' : 'postgresql';
  session.prepareQuery = (query, ...rest) => {
    const prepared = prepare(query, ...rest);
    const execute = prepared.execute.bind(prepared);
    prepared.execute = (...args) =>
      inSpan(
        'db.query',
        { 'db.system': system, 'db.statement': query.sql.slice(0, 2000) },
        () => execute(...args),
        SpanKind.CLIENT,
      );
    return prepared;
  };
}

interface RedisCommand {
  name: string;
  promise: Promise<unknown>;
}

/** A `redis <COMMAND>` span for every command of this client (the command name only: keys hold session ids). */
export function traceRedis(redis: Redis) {
  const client = redis as unknown as { sendCommand(command: RedisCommand, ...rest: unknown[]): unknown };
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command, ...rest) => {
    const span = tracer().startSpan(`redis ${command.name}`, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system': 'redis', 'db.operation': command.name },
    });
    command.promise.then(
      () => span.end(),
      (error: unknown) => {
        failSpan(span, error);
        span.end();
      },
    );
    return send(command, ...rest);
  };
}
