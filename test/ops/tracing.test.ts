import {
  type Attributes,
  type Context,
  context,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSession } from '../support/clients.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * OpenTelemetry hooks, with a recording tracer provider standing in for the SDK an operator
 * would preload (only @opentelemetry/api is a dependency). Each test file runs in its own
 * process, so registering the global provider here touches no other test.
 */
interface Recorded {
  name: string;
  attributes: Attributes;
  status?: SpanStatus;
  ended: boolean;
}

const recorded: Recorded[] = [];

function recordingSpan(name: string, options: SpanOptions = {}): Span {
  const entry: Recorded = { name, attributes: { ...options.attributes }, ended: false };
  recorded.push(entry);
  const spanContext: SpanContext = { traceId: `${'0'.repeat(31)}1`, spanId: `${'0'.repeat(15)}1`, traceFlags: 1 };
  const span: Span = {
    spanContext: () => spanContext,
    setAttribute: (key, value) => {
      if (value !== undefined) entry.attributes[key] = value;
      return span;
    },
    setAttributes: (attributes) => {
      Object.assign(entry.attributes, attributes);
      return span;
    },
    addEvent: () => span,
    addLink: () => span,
    addLinks: () => span,
    setStatus: (status) => {
      entry.status = status;
      return span;
    },
    updateName: (next) => {
      entry.name = next;
      return span;
    },
    end: () => {
      entry.ended = true;
    },
    isRecording: () => true,
    recordException: () => {},
  };
  return span;
}

const tracer: Tracer = {
  startSpan: (name, options) => recordingSpan(name, options),
  startActiveSpan<F extends (span: Span) => unknown>(name: string, ...args: unknown[]): ReturnType<F> {
    const fn = args[args.length - 1] as F;
    const options = (typeof args[0] === 'object' ? args[0] : {}) as SpanOptions;
    const parent = (args.length === 3 ? args[1] : context.active()) as Context;
    const span = recordingSpan(name, options);
    return context.with(trace.setSpan(parent, span), () => fn(span)) as ReturnType<F>;
  },
};
const provider: TracerProvider = { getTracer: () => tracer };

describe('OpenTelemetry hooks (OTEL_ENABLED=on)', () => {
  let t: TestApp;
  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    t = await startTestApp({ env: { OTEL_ENABLED: 'on' } });
  });
  afterAll(async () => {
    await t.stop();
    trace.disable();
  });

  it('a server span per HTTP request, named by method and route pattern', async () => {
    const { token } = await agentSession(t.url, 'alice');
    recorded.length = 0;
    await fetch(`${t.url}/agent/data/get?token=${token}`);
    // The span ends once the response has been sent, which may trail the client's read a little.
    const find = () => recorded.find((s) => s.name === 'GET /agent/data/get' && s.ended);
    for (let i = 0; i < 100 && !find(); i++) await new Promise((r) => setTimeout(r, 20));
    const http = find();
    expect(http).toMatchObject({
      ended: true,
      attributes: { 'http.route': '/agent/data/get', 'http.response.status_code': 200 },
    });
    expect(JSON.stringify(recorded)).not.toContain(token);
  });

  it('spans around GraphQL execution, database statements and Redis commands', async () => {
    const { client, token } = await agentSession(t.url, 'alice');
    recorded.length = 0;
    const res = await client.graphql('{ agentWorkbench { agent { agentId } } }', undefined, { token });
    expect(res.body.errors).toBeUndefined();
    expect(recorded.find((s) => s.name === 'graphql query agentWorkbench')).toMatchObject({
      ended: true,
      attributes: { 'graphql.operation.type': 'query', 'graphql.operation.field': 'agentWorkbench' },
    });
    const db = recorded.filter((s) => s.name === 'db.query');
    expect(db.length).toBeGreaterThan(0);
    expect(String(db[0]?.attributes['db.statement'])).toMatch(/select/i);
    if (t.config.redisUrl) {
      expect(recorded.some((s) => s.name.startsWith('redis ') && s.attributes['db.system'] === 'redis')).toBe(true);
      // Keys hold Session ids: a Redis span names the command only.
      expect(JSON.stringify(recorded.filter((s) => s.name.startsWith('redis ')))).not.toContain(token);
    }
  });
});

describe('OpenTelemetry hooks are off by default', () => {
  let t: TestApp;
  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    t = await startTestApp();
  });
  afterAll(async () => {
    await t.stop();
    trace.disable();
  });

  it('creates no span', async () => {
    recorded.length = 0;
    await agentSession(t.url, 'alice');
    expect(recorded).toEqual([]);
  });
});
