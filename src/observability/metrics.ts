import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** Why a login attempt failed; a fixed set, so it can be a metric label. */
type LoginFailureReason = 'captcha' | 'credentials' | 'locked' | 'disabled';
/** Why an event did not reach (all) its subscribers. */
type EventDropReason = 'publish_failed' | 'history_gap' | 'slow_consumer';
type Backend = 'postgres' | 'redis';

/**
 * The gateway's metrics, as plain methods: the domain (src/resolvers/) and the adapters call
 * these without knowing prom-client. Every label value is either from a fixed set or a route
 * pattern / schema field name, never raw input, so no token or id can become a label.
 */
export interface Metrics {
  /** One finished HTTP request; `route` is the matched pattern (`/agent/data/get`), never the raw URL. */
  httpRequest(method: string, route: string, status: number, seconds: number): void;
  /** One GraphQL operation executed; `field` is its first root field (a schema name). */
  graphqlOperation(type: string, field: string): void;
  /** One GraphQL error; `code` is the `extensions.code` the client saw. */
  graphqlError(type: string, field: string, code: string): void;
  socketOpened(): void;
  socketClosed(): void;
  subscriptionStarted(): void;
  subscriptionEnded(): void;
  eventPublished(): void;
  /** `count` frames of channel events written to subscriptions (graphql-ws or Pusher). */
  eventDelivered(count?: number): void;
  eventDropped(reason: EventDropReason): void;
  /** A read of a channel's kept history (a resume's replay page) that reached the store. */
  historyRead(): void;
  loginFailed(reason: LoginFailureReason): void;
  /** A login refused by a brute-force lock of the account or the client address (also a `locked` failure). */
  loginLocked(scope: 'account' | 'ip'): void;
  captchaIssued(purpose: string): void;
  smsSent(outcome: 'sent' | 'failed'): void;
  /** A probe run at every scrape: `parley_backend_up{backend}` is 1 when it resolves in time. */
  addHealthProbe(backend: Backend, probe: () => Promise<unknown>): void;
  /** The Prometheus text exposition; empty when metrics are disabled. */
  render(): Promise<string>;
  readonly contentType: string;
  readonly enabled: boolean;
}

/** HTTP latency buckets (seconds): from a cached read to a slow login with argon2 and a cold database. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * Metrics of one gateway instance in a registry of its own (several apps in one test process
 * never collide). With `enabled: false` every method is a no-op and `render()` is empty.
 */
export function createMetrics(opts: { enabled: boolean }): Metrics {
  if (!opts.enabled) return disabledMetrics();
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  // Declared in this order, and so exposed in it.
  return {
    enabled: true,
    contentType: registry.contentType,
    ...requestMetrics(registers),
    ...realtimeMetrics(registers),
    ...authMetrics(registers),
    ...backendUpMetric(registers),
    render: () => registry.metrics(),
  };
}

type Registers = Registry[];

/** HTTP requests and GraphQL operations. */
function requestMetrics(registers: Registers): Pick<Metrics, 'httpRequest' | 'graphqlOperation' | 'graphqlError'> {
  const http = new Histogram({
    name: 'parley_http_request_duration_seconds',
    help: 'HTTP request latency by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: HTTP_BUCKETS,
    registers,
  });
  const operations = new Counter({
    name: 'parley_graphql_operations_total',
    help: 'GraphQL operations executed, by operation type and root field.',
    labelNames: ['operation_type', 'field'] as const,
    registers,
  });
  const graphqlErrors = new Counter({
    name: 'parley_graphql_errors_total',
    help: 'GraphQL errors returned, by operation type, root field and extensions.code.',
    labelNames: ['operation_type', 'field', 'code'] as const,
    registers,
  });
  return {
    httpRequest: (method, route, status, seconds) =>
      http.observe({ method, route, status_code: String(status) }, seconds),
    graphqlOperation: (type, field) => operations.inc({ operation_type: type, field }),
    graphqlError: (type, field, code) => graphqlErrors.inc({ operation_type: type, field, code }),
  };
}

/** Sockets, subscriptions and channel events. */
function realtimeMetrics(
  registers: Registers,
): Pick<
  Metrics,
  | 'socketOpened'
  | 'socketClosed'
  | 'subscriptionStarted'
  | 'subscriptionEnded'
  | 'eventPublished'
  | 'eventDelivered'
  | 'eventDropped'
  | 'historyRead'
> {
  const sockets = new Gauge({
    name: 'parley_websocket_connections',
    help: 'Open WebSocket (graphql-ws) connections.',
    registers,
  });
  const subscriptions = new Gauge({
    name: 'parley_subscriptions_active',
    help: 'Active channel subscriptions on this instance (graphql-ws and Pusher).',
    registers,
  });
  const published = new Counter({
    name: 'parley_events_published_total',
    help: 'Channel events published from this instance.',
    registers,
  });
  const delivered = new Counter({
    name: 'parley_events_delivered_total',
    help: 'Channel events sent to a subscription on this instance, graphql-ws or Pusher (one per subscriber).',
    registers,
  });
  const dropped = new Counter({
    name: 'parley_events_dropped_total',
    help: 'Channel events lost: publish failures, history gaps seen by resuming clients, slow consumers cut off.',
    labelNames: ['reason'] as const,
    registers,
  });
  const historyReads = new Counter({
    name: 'parley_history_reads_total',
    help: "Reads of a channel's kept history (resumes with since) that reached the store; concurrent identical reads share one.",
    registers,
  });
  return {
    socketOpened: () => sockets.inc(),
    socketClosed: () => sockets.dec(),
    subscriptionStarted: () => subscriptions.inc(),
    subscriptionEnded: () => subscriptions.dec(),
    eventPublished: () => published.inc(),
    eventDelivered: (count = 1) => delivered.inc(count),
    eventDropped: (reason) => dropped.inc({ reason }),
    historyRead: () => historyReads.inc(),
  };
}

/** Agent logins, captchas and SMS codes. */
function authMetrics(registers: Registers): Pick<Metrics, 'loginFailed' | 'loginLocked' | 'captchaIssued' | 'smsSent'> {
  const loginFailures = new Counter({
    name: 'parley_login_failures_total',
    help: 'Failed agent logins, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  const loginLocks = new Counter({
    name: 'parley_login_lockouts_total',
    help: 'Logins refused by a brute-force lock, by scope (account or client address).',
    labelNames: ['scope'] as const,
    registers,
  });
  const captchas = new Counter({
    name: 'parley_captchas_issued_total',
    help: 'Graphic captchas issued, by purpose (login, join).',
    labelNames: ['purpose'] as const,
    registers,
  });
  const sms = new Counter({
    name: 'parley_sms_sends_total',
    help: 'SMS verification codes handed to the SMS driver, by outcome.',
    labelNames: ['outcome'] as const,
    registers,
  });

  return {
    loginFailed: (reason) => loginFailures.inc({ reason }),
    loginLocked: (scope) => {
      loginLocks.inc({ scope });
      loginFailures.inc({ reason: 'locked' });
    },
    captchaIssued: (purpose) => captchas.inc({ purpose }),
    smsSent: (outcome) => sms.inc({ outcome }),
  };
}

/** `parley_backend_up{backend}`: the registered probes, run at every scrape. */
function backendUpMetric(registers: Registers): Pick<Metrics, 'addHealthProbe'> {
  const probes = new Map<Backend, () => Promise<unknown>>();
  new Gauge({
    name: 'parley_backend_up',
    help: 'Whether a backing service (postgres, redis) answered a ping within 2 s at this scrape.',
    labelNames: ['backend'] as const,
    registers,
    async collect() {
      await Promise.all(
        [...probes].map(async ([backend, probe]) => {
          const up = await withTimeout(probe(), 2000).then(
            () => 1,
            () => 0,
          );
          this.set({ backend }, up);
        }),
      );
    },
  });
  return {
    addHealthProbe: (backend, probe) => {
      probes.set(backend, probe);
    },
  };
}

function disabledMetrics(): Metrics {
  const noop = () => {};
  return {
    enabled: false,
    contentType: 'text/plain; version=0.0.4; charset=utf-8',
    httpRequest: noop,
    graphqlOperation: noop,
    graphqlError: noop,
    socketOpened: noop,
    socketClosed: noop,
    subscriptionStarted: noop,
    subscriptionEnded: noop,
    eventPublished: noop,
    eventDelivered: noop,
    eventDropped: noop,
    historyRead: noop,
    loginFailed: noop,
    loginLocked: noop,
    captchaIssued: noop,
    smsSent: noop,
    addHealthProbe: noop,
    render: async () => '',
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
