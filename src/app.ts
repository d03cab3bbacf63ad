import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { buildDeps } from './compose.js';
import type { Config } from './config.js';
import type { Database } from './db/client.js';
import type { Deps } from './deps.js';
import { DomainError, serviceUnavailable } from './errors.js';
import { cappedRawBody, declaredBodyCap } from './http/body-limit.js';
import { limitServer, serverOptions } from './http/connections.js';
import { graphqlCors } from './http/cors.js';
import { refuseCrossSiteWrites } from './http/cross-site.js';
import { type FrontRoute, frontDoor, plainGet, writeJson } from './http/front.js';
import { refuseMalformedGraphQLParams } from './http/graphql-params.js';
import { noStoreOnApiPaths } from './http/no-store.js';
import { agentSessionUnlessBearer, createSessionLayer, type SessionLayer } from './http/session.js';
import { createLogger, type Logger } from './log.js';
import { countSockets, metricsGuard, requestObservability } from './observability/http.js';
import { instrumentDeps } from './observability/instrument.js';
import { pageRoutes } from './pages/routes.js';
import { securityHeaders } from './pages/security-headers.js';
import { startAttachmentCleanup } from './resolvers/attachments/cleanup.js';
import { createHoursScheduler } from './resolvers/availability/hours-events.js';
import { createChatService } from './resolvers/chat-service.js';
import { loadDemoDataIfEmpty } from './resolvers/demo.js';
import { createWebhookDispatcher } from './resolvers/integration/webhooks/dispatcher.js';
import { isStreamingUpload } from './rest/attachments.js';
import { endpoints } from './rest/endpoints.js';
import { sendError } from './rest/envelope.js';
import { HEALTHY } from './rest/health.js';
import { refuseTwoIdentities } from './rest/one-identity.js';
import { openApiDocsPages } from './rest/openapi.js';
import { bodyError, MAX_BODY, mountRoutes } from './rest/route.js';
import { createGraphQLServer } from './schema/yoga.js';
import { createDirectGraphQL } from './schema/yoga-direct.js';
import { createConnectionCore } from './subscriptions/connection.js';
import { createFanout } from './subscriptions/fanout.js';
import { createPusherServer, PUSHER_PATH } from './subscriptions/pusher.js';
import { createSubscriptionServer } from './subscriptions/ws.js';

/** Bodies larger than this are refused with 413 before they are parsed. */
export { MAX_BODY };
/** No request waits longer than this (e.g. for an exhausted database pool): it gets a 503. */
export const REQUEST_DEADLINE_MS = 10_000;

export interface App {
  server: Server;
  deps: Deps;
  /** The agent Session store and middleware (tests read a Session's state through `storedPort`). */
  sessions: SessionLayer;
  /** Migrates, seeds demo data when configured, and listens. Resolves with the bound port. */
  start(): Promise<number>;
  /** Graceful shutdown: stop accepting, finish in-flight requests, close sockets and stores. */
  stop(): Promise<void>;
}

/**
 * The composition root: builds the whole gateway from a validated config. `database`: an already
 * opened database instead of the configured one (the app closes it on stop).
 */
export async function buildApp(config: Config, opts: { log?: Logger; database?: Database } = {}): Promise<App> {
  const log = opts.log ?? createLogger(config.logLevel);
  if (config.captchaTestAnswer) log.warn('CAPTCHA_TEST_ANSWER is set: every captcha has a fixed answer (tests only)');
  const deps = await buildDeps(config, log, { database: opts.database });
  instrumentDeps(deps);
  const sessions = createSessionLayer(config, deps.redis);
  // The common JSON POST skips yoga's Fetch API adapter (src/schema/yoga-direct.ts).
  const directGraphQL = createDirectGraphQL();
  const yoga = createGraphQLServer(deps, [directGraphQL.plugin]);
  // The chat's background work (outbox drain, idle close, queue retry): started with the server.
  const chat = createChatService(deps);
  // Webhook deliveries (docs/integration.md): every instance sends its share of the due ones.
  const webhooks = createWebhookDispatcher(deps);
  const { storage } = deps;

  const http = expressApp(deps, config, log, { sessions, yoga, directGraphQL });
  const server = frontServer(config, http);
  const { subscriptions, pusher, fanout } = realtimeTransports(deps, server, yoga, sessions);
  // Business hours' open/close events at each boundary, to the visitors subscribed here too.
  const hours = createHoursScheduler(deps, {
    localVisitorChannels: () => fanout.visitorChannels(),
    reloadMs: config.businessHoursReloadMs,
  });
  const services = { chat, hours, webhooks, subscriptions, pusher, storage };
  return { server, deps, sessions, ...lifecycle(config, deps, log, server, services) };
}

type Yoga = ReturnType<typeof createGraphQLServer>;
type DirectGraphQL = ReturnType<typeof createDirectGraphQL>;

/** The express application: every request's layers, GraphQL, the route table, the pages and the fallbacks. */
function expressApp(
  deps: Deps,
  config: Config,
  log: Logger,
  { sessions, yoga, directGraphQL }: { sessions: SessionLayer; yoga: Yoga; directGraphQL: DirectGraphQL },
) {
  const app = express();
  app.disable('x-powered-by');
  // JSON answers are per-caller and never cached: hashing every body for an ETag is wasted work.
  app.set('etag', false);
  app.set('trust proxy', config.trustProxy);
  // Every request's layers, in order; the front door (below) runs the very same ones.
  const globalLayers: RequestHandler[] = [
    requestObservability(deps, log),
    securityHeaders(config),
    requestDeadline(REQUEST_DEADLINE_MS, log),
    refuseCrossSiteWrites(config),
    declaredBodyCap(isStreamingUpload),
    refuseTwoIdentities(log),
    noStoreOnApiPaths,
  ];
  app.use(...globalLayers);
  app.use('/metrics', metricsGuard(config));
  // The agent Session serves the REST endpoints and the pages under /agent alike.
  app.use('/agent', sessions.middleware);
  const unlessBearer = agentSessionUnlessBearer(sessions);
  // A request with a visitor bearer token is a visitor (one identity per request): the agent
  // Session layer is not run for it, which spares it creating and hashing an unused Session.
  // Mounted before the route table, which GraphQL requests would otherwise walk in full (about
  // 70 layers, none of them theirs: BENCHMARKS.md "Where a request's time goes").
  const graphqlLayers: RequestHandler[] = [
    graphqlCors(config),
    refuseMalformedGraphQLParams,
    unlessBearer,
    express.json({ limit: MAX_BODY }),
    directGraphQL.handle(yoga as never),
    cappedRawBody,
    (req: Request, res: Response) => {
      yoga.requestListener(req, res);
    },
  ];
  app.use('/graphql', ...graphqlLayers);
  const rest = mountRoutes(deps, endpoints, { agentSessionUnlessBearer: unlessBearer });
  app.use(rest);
  // Matched after the hot API paths, so those traverse as few layers as possible.
  app.use(openApiDocsPages(config, endpoints));
  app.use(pageRoutes(deps));
  app.use((_req, res) => sendError(res, new DomainError('NOT_FOUND', 'Not found'), log));
  const fail = (error: unknown, _req: Request, res: Response) => sendError(res, bodyError(error), log);
  app.use((error: unknown, req: Request, res: Response, _next: NextFunction) => fail(error, req, res));
  return { app, globalLayers, graphqlLayers, rest, fail };
}

/** The HTTP server, its connection limits, and the front door before express. */
function frontServer(config: Config, { app, globalLayers, graphqlLayers, rest, fail }: ReturnType<typeof expressApp>) {
  // The liveness probe, the common GraphQL request and a visitor's JSON message run the same
  // layers before express (src/http/front.ts): what express itself adds to them is most of their cost.
  const healthy = JSON.stringify(HEALTHY);
  const restFront = (path: string): FrontRoute[] => {
    const layers = rest.layersOf('post', path);
    return layers ? [{ method: 'POST', path, accepts: jsonPost, baseUrl: '', route: path, layers }] : [];
  };
  const front = frontDoor(app, {
    layers: globalLayers,
    routes: [
      {
        method: 'GET',
        path: '/healthz',
        accepts: plainGet,
        baseUrl: '',
        route: '/healthz',
        layers: [(_req: Request, res: Response) => writeJson(res, 200, healthy)],
      },
      // A JSON POST (a form post or any other type goes to express, whose layers refuse or parse it).
      { method: 'POST', path: '/graphql', accepts: jsonPost, baseUrl: '/graphql', layers: graphqlLayers },
      // The chat's hottest write (BENCHMARKS.md row 9).
      ...restFront('/visitor/message/send'),
    ],
    fail,
  });
  const server = createServer(serverOptions(config.hardening), front);
  limitServer(server, config.hardening, { trustProxy: config.trustProxy });
  return server;
}

/** graphql-ws and the Pusher protocol on the server's port, over one connection core and one fan-out. */
function realtimeTransports(deps: Deps, server: Server, yoga: Yoga, sessions: SessionLayer) {
  // One connection core (identity, caps, re-checks) under every real-time transport.
  const connections = createConnectionCore(deps, sessions);
  // One delivery path of channel events under both: one bus subscription per channel and instance.
  const fanout = createFanout(deps);
  const subscriptions = createSubscriptionServer(deps, yoga, sessions, connections, fanout);
  const pusher = createPusherServer(deps, sessions, connections, fanout);
  countSockets(subscriptions.wss, deps.metrics);
  countSockets(pusher.wss, deps.metrics);
  server.on('upgrade', (req, socket, head) => {
    // One port, two protocols: graphql-ws at /graphql, the Pusher protocol at /app/{appkey}.
    const { pathname } = new URL(req.url ?? '/', 'http://x');
    const wss = pathname === '/graphql' ? subscriptions.wss : PUSHER_PATH.test(pathname) ? pusher.wss : undefined;
    if (!wss) {
      socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  return { subscriptions, pusher, fanout };
}

/** The app's start (migrate, seed, listen, then the background work) and its graceful stop. */
function lifecycle(
  config: Config,
  deps: Deps & { close(): Promise<void> },
  log: Logger,
  server: Server,
  services: {
    chat: ReturnType<typeof createChatService>;
    hours: ReturnType<typeof createHoursScheduler>;
    webhooks: ReturnType<typeof createWebhookDispatcher>;
    subscriptions: ReturnType<typeof createSubscriptionServer>;
    pusher: ReturnType<typeof createPusherServer>;
    storage: Deps['storage'];
  },
): Pick<App, 'start' | 'stop'> {
  const { chat, hours, webhooks, subscriptions, pusher, storage } = services;
  let attachmentCleanup: { stop(): Promise<void> } | undefined;
  let stopping: Promise<void> | undefined;
  return {
    async start() {
      await deps.database.migrate();
      if (config.demoSeed) await loadDemoDataIfEmpty(deps);
      // Merchant configuration is cached from here on, invalidated through the bus (README "Configuration cache").
      await deps.configCache.start();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.port, config.host, () => resolve());
      });
      chat.start();
      hours.start();
      webhooks.start();
      deps.realtime.start();
      attachmentCleanup = startAttachmentCleanup(deps, storage);
      const { port } = server.address() as AddressInfo;
      log.info({ port, database: deps.database.kind, redis: Boolean(deps.redis) }, 'parley listening');
      return port;
    },
    stop() {
      stopping ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await Promise.all([subscriptions.close(), pusher.close()]);
        // In-flight requests get a few seconds to finish; then the remaining connections go.
        const timer = setTimeout(() => server.closeAllConnections(), 5000);
        await closed;
        clearTimeout(timer);
        await chat.stop();
        await hours.stop();
        await webhooks.stop();
        await attachmentCleanup?.stop();
        await deps.close();
      })();
      return stopping;
    },
  };
}

/** `Content-Type: application/json` (any parameters), the common GraphQL POST. */
function jsonPost(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return typeof type === 'string' && /^application\/json\s*(;|$)/i.test(type);
}

/**
 * Answers 503 when a request has not been answered in `ms`, so a stalled backing service never
 * leaves a caller hanging; whatever the handler produces later is dropped. Event streams are
 * exempt (they are meant to stay open).
 */
function requestDeadline(ms: number, log: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    // Event streams stay open; an upload takes as long as its bytes take (Node's requestTimeout bounds it).
    if ((req.headers.accept ?? '').includes('text/event-stream') || isStreamingUpload(req)) return next();
    const timer = setTimeout(() => {
      if (!res.headersSent) sendError(res, serviceUnavailable('The service'), log);
    }, ms);
    res.on('close', () => clearTimeout(timer));
    next();
  };
}
