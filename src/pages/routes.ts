import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type Request, type Response, Router } from 'express';
import type { Deps } from '../deps.js';
import { DomainError, notLoggedIn } from '../errors.js';
import { clientIp } from '../http/request.js';
import { requestSessionPort } from '../http/session.js';
import { ADMIN_PAGE_PATH } from '../resolvers/desk/registration.js';
import { TICKET_ENTRY_PATH, WORKBENCH_PATH } from '../resolvers/login.js';
import { merchantConfig } from '../resolvers/merchant.js';
import { ADMIN, type AgentViewer, requireAgent, requireOnlineReception } from '../resolvers/viewer.js';
import { sendError } from '../rest/envelope.js';
import { CLIENT_PACKAGE_PATH, clientPackageTarball } from './client-package.js';
import { mountWidget } from './widget.js';

const here = dirname(fileURLToPath(import.meta.url));
const ASSETS_DIR = join(here, 'assets');
const VIEWS_DIR = join(here, 'views');
export const LOGIN_PAGE_PATH = '/agent/login';

// The graphql-ws browser client: dist/client.js and the one shared chunk it imports.
const GRAPHQL_WS_DIST = dirname(createRequire(import.meta.url).resolve('graphql-ws/client'));
const GRAPHQL_WS_FILE = /^\/(client|common-[A-Za-z0-9_-]+)\.js$/;

/**
 * The browser pages: agent login and registration, the workbench, the ticket entry and the
 * visitor chat demo, with their static assets. Pages hold no data of their own: they call the
 * same JSON endpoints and WebSocket as any other client.
 */
export function pageRoutes(deps: Deps): Router {
  const router = Router();
  const views = loadViews();
  const page: RenderPage = (res, name, vars = {}) => {
    res.set({ 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
    // The pages install their window.__parley test hooks only when this says `on`: never in production.
    res.send(render(views[name], { testHooks: deps.config.env === 'production' ? 'off' : 'on', ...vars }));
  };

  mountAssets(router);
  mountAgentPages(router, deps, page);

  // The visitor demo: a host page embedding the widget as a merchant's site would (appkey from the query).
  router.get('/visitor/', (req, res) => {
    const appkey = new URL(req.url, 'http://x').searchParams.get('appkey')?.trim().slice(0, 128) ?? '';
    page(res, 'visitor', { appkey });
  });
  mountWidget(router, ASSETS_DIR, (res) => page(res, 'widgetFrame'));

  // Unknown JSON under /agent/*: not logged in → -1 (spec), logged in → 404.
  router.use('/agent', (req, res) => {
    sendError(res, req.session?.agent ? new DomainError('NOT_FOUND', 'Not found') : notLoggedIn(), deps.log);
  });
  return router;
}

/** Answers with one of the views, its variables filled in. */
type RenderPage = (res: Response, name: keyof ReturnType<typeof loadViews>, vars?: Record<string, string>) => void;

/** The pages' scripts and styles, the Parley client and its graphql-ws build, the client package. */
function mountAssets(router: Router) {
  // The Parley real-time client (client/index.js, beside src/ and dist/ alike) for the pages, its
  // graphql-ws import pointed at the browser build served below.
  const parleyClient = readFileSync(join(here, '../../client/index.js'), 'utf8').replace(
    "from 'graphql-ws'",
    "from '/assets/vendor/graphql-ws/client.js'",
  );
  const clientPackage = clientPackageTarball(join(here, '../../client'));
  router.get(CLIENT_PACKAGE_PATH, (_req, res) => {
    res.set({
      'Content-Type': 'application/gzip',
      'Content-Disposition': 'attachment; filename="parley-client.tgz"',
      'Cache-Control': 'no-cache',
    });
    res.send(clientPackage);
  });
  router.get('/assets/vendor/parley-client.js', (_req, res) => {
    res.set({ 'Content-Type': 'text/javascript; charset=utf-8', 'Cache-Control': 'no-cache' });
    res.send(parleyClient);
  });
  router.use('/assets/vendor/graphql-ws', (req, res, next) => {
    if (!GRAPHQL_WS_FILE.test(req.path)) return next();
    // A file that is not there falls through to the 404 answer (no error, no stack in the log).
    res.sendFile(
      join(GRAPHQL_WS_DIST, req.path),
      { headers: { 'Content-Type': 'text/javascript; charset=utf-8' } },
      (error?: Error & { status?: number; code?: string }) => {
        if (!error) return;
        if (res.headersSent) return;
        if (error.status === 404 || error.code === 'ENOENT' || error.code === 'EISDIR') return next();
        next(error);
      },
    );
  });
  // Revalidated on every load (ETag), so a deploy is picked up at once.
  const revalidate = { index: false, redirect: false, cacheControl: false } as const;
  router.use(
    '/assets',
    (_req, res, next) => {
      res.set('Cache-Control', 'no-cache');
      next();
    },
    express.static(ASSETS_DIR, revalidate),
  );
}

/** The agent's pages: each sends an agent to the entry its Session and level allow. */
function mountAgentPages(router: Router, deps: Deps, page: RenderPage) {
  // The agent of this request's Session, or undefined when there is none (or it is no longer valid).
  const agentOf = async (req: Request): Promise<AgentViewer | undefined> => {
    if (!req.session?.agent) return undefined;
    try {
      return await requireAgent(deps, requestSessionPort(req), clientIp(req, deps.config));
    } catch {
      return undefined;
    }
  };
  const entryOf = (viewer: AgentViewer) => {
    try {
      requireOnlineReception(viewer);
      return WORKBENCH_PATH;
    } catch {
      return TICKET_ENTRY_PATH;
    }
  };

  router.get(LOGIN_PAGE_PATH, async (req, res) => {
    const viewer = await agentOf(req);
    if (viewer) return res.redirect(303, entryOf(viewer));
    page(res, 'login');
  });

  router.get('/agent/join', (_req, res) => {
    page(res, 'join', {
      smsRegistration: deps.config.smsRegistration ? 'on' : 'off',
      registration: deps.config.registration ? 'on' : 'off',
    });
  });

  // Spec: GET /agent/ with no login Session redirects to the login page; a ticket agent goes to its entry.
  router.get(WORKBENCH_PATH, async (req, res) => {
    const viewer = await agentOf(req);
    if (!viewer) return res.redirect(303, LOGIN_PAGE_PATH);
    if (entryOf(viewer) !== WORKBENCH_PATH) return res.redirect(303, TICKET_ENTRY_PATH);
    page(res, 'workbench');
  });

  router.get(TICKET_ENTRY_PATH, async (req, res) => {
    const viewer = await agentOf(req);
    if (!viewer) return res.redirect(303, LOGIN_PAGE_PATH);
    page(res, 'ticket', { nickname: viewer.agent.nickname });
  });

  // The admin page: admins only; another agent goes to its own entry page.
  router.get(ADMIN_PAGE_PATH, async (req, res) => {
    const viewer = await agentOf(req);
    if (!viewer) return res.redirect(303, LOGIN_PAGE_PATH);
    if (viewer.level !== ADMIN) return res.redirect(303, entryOf(viewer));
    const merchant = (await merchantConfig(deps, viewer.merchantId))?.merchant;
    page(res, 'admin', { appname: merchant?.appname ?? '', bid: viewer.bid });
  });
}

function loadViews() {
  const read = (name: string) => readFileSync(join(VIEWS_DIR, `${name}.html`), 'utf8');
  return {
    login: read('login'),
    join: read('join'),
    admin: read('admin'),
    workbench: read('workbench'),
    ticket: read('ticket'),
    visitor: read('visitor'),
    widgetFrame: read('widget-frame'),
  };
}

/** Fills `{{name}}` placeholders with HTML-escaped values; unknown placeholders become empty. */
export function render(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_m, name: string) => escapeHtml(vars[name] ?? ''));
}

export function escapeHtml(value: string): string {
  return value.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );
}
