import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../src/config.js';
import { endpoints } from '../../src/rest/endpoints.js';

/**
 * The deployment files cannot run here (no Docker engine), so this checks they agree with the
 * code CI tests: compose.yaml's settings pass the gateway's own validation, nginx routes to the
 * instances compose defines on the port they listen on and upgrades WebSockets, the Dockerfile
 * runs the command test/ops/multi-instance.test.ts runs, and .env.example documents every variable.
 */
const read = (file: string) => readFileSync(file, 'utf8');
const compose = read('compose.yaml');
const nginx = read('deploy/nginx.conf');
const dockerfile = read('Dockerfile');

/** The lines of the mapping under the line `<indent><header>`, unindented (compose.yaml is plain block YAML). */
function block(text: string, header: string, indent: string): string[] {
  const lines = text.split('\n');
  const start = lines.indexOf(`${indent}${header}`);
  if (start < 0) throw new Error(`${header} not found in compose.yaml`);
  const inner = `${indent}  `;
  const out: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '' || line.trim().startsWith('#')) continue;
    if (!line.startsWith(inner)) break;
    out.push(line.slice(inner.length));
  }
  return out;
}

/** The gateway environment of compose.yaml, `${VAR:?…}` / `${VAR:-default}` resolved with `vars`. */
function gatewayEnvironment(vars: Record<string, string>) {
  const gateway = block(compose, 'x-gateway: &gateway', '').join('\n');
  const env: Record<string, string> = {};
  for (const line of block(gateway, 'environment:', '')) {
    const match = /^([A-Z][A-Z0-9_]*): (.*)$/.exec(line);
    if (!match) continue;
    const [, key = '', raw = ''] = match;
    env[key] = raw
      .replace(/^"(.*)"$/, '$1')
      .replace(/\$\{([A-Z0-9_]+)(?::[?-]([^}]*))?\}/g, (_m, name: string, fallback = '') =>
        name in vars ? (vars[name] as string) : fallback.startsWith('set ') ? '' : fallback,
      );
  }
  return env;
}

const secrets = {
  POSTGRES_PASSWORD: 'compose-password',
  SESSION_SECRET: 's'.repeat(48),
  INTERNAL_API_TOKEN: 'i'.repeat(32),
};

describe('compose.yaml', () => {
  it('sets only variables the gateway reads, and its production settings pass the gateway validation', () => {
    const env = gatewayEnvironment(secrets);
    for (const key of Object.keys(env)) expect(CONFIG_VARIABLES, `${key} is read by src/config.ts`).toContain(key);
    const config = loadConfig(env);
    expect(config.env).toBe('production');
    expect(config.demoSeed).toBe(false);
    expect(config.trustProxy).toBe(true); // nginx sets X-Forwarded-*
    expect(new URL(config.databaseUrl as string).hostname).toBe('postgres');
    expect(new URL(config.redisUrl as string).hostname).toBe('redis');
    expect(config.metricsEnabled).toBe(true);
  });

  it('refuses to start without the secrets (compose marks them required)', () => {
    expect(compose).toMatch(/SESSION_SECRET: \$\{SESSION_SECRET:\?/);
    expect(compose).toMatch(/POSTGRES_PASSWORD:\?/);
    expect(() => loadConfig(gatewayEnvironment({ POSTGRES_PASSWORD: 'x' }))).toThrow(/SESSION_SECRET/);
  });

  it('runs PostgreSQL, Redis, two gateway instances with the shared settings, and the proxy', () => {
    const services = block(compose, 'services:', '')
      .filter((l) => /^[a-z0-9-]+:/.test(l))
      .map((l) => l.split(':')[0]);
    expect(services).toEqual(['postgres', 'redis', 'gateway-1', 'gateway-2', 'proxy']);
    expect(compose).toMatch(/^ {2}gateway-1: \*gateway$/m);
    expect(compose).toMatch(/^ {2}gateway-2: \*gateway$/m);
    expect(compose).toContain('./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro');
  });
});

describe('deploy/nginx.conf', () => {
  const port = gatewayEnvironment(secrets).PORT;

  it('balances over both gateway instances on the port they listen on, without sticky sessions', () => {
    const upstream = /upstream parley_gateways \{([^}]*)\}/.exec(nginx)?.[1] ?? '';
    expect(upstream).toContain(`server gateway-1:${port}`);
    expect(upstream).toContain(`server gateway-2:${port}`);
    expect(upstream).not.toMatch(/ip_hash|hash |sticky/);
  });

  it('upgrades WebSockets on /graphql and passes the headers TRUST_PROXY relies on', () => {
    expect(nginx).toMatch(/proxy_set_header Upgrade \$http_upgrade;/);
    expect(nginx).toMatch(/proxy_set_header Connection \$connection_upgrade;/);
    expect(nginx).toMatch(/proxy_http_version 1\.1;/);
    expect(nginx).toMatch(/location \/graphql \{[^}]*proxy_read_timeout 1h;/);
    // Overwritten, never appended: the gateway trusts the first X-Forwarded-For hop.
    expect(nginx).toMatch(/proxy_set_header X-Forwarded-For \$remote_addr;/);
    expect(nginx).not.toMatch(/\$proxy_add_x_forwarded_for/);
    expect(nginx).toMatch(/proxy_set_header X-Forwarded-Proto \$scheme;/);
    expect(nginx).toMatch(/proxy_set_header X-Request-Id \$parley_request_id;/);
  });

  it('upgrades the Pusher protocol at /app/ with a read timeout above its 120 s activity timeout', () => {
    expect(nginx).toMatch(/location \/app\/ \{[^}]*proxy_read_timeout 1h;/);
  });

  it('logs no query string: its own access log format, without $request, $args or the Referer', () => {
    const format = /log_format parley_noquery ([^;]*);/.exec(nginx)?.[1] ?? '';
    expect(format).toContain('$uri');
    expect(format).not.toMatch(/\$request\b|\$request_uri|\$args|\$query_string|\$http_referer/);
    expect(nginx).toMatch(/access_log \S+ parley_noquery;/);
  });

  it('keeps /metrics and /internal/ off the public side', () => {
    expect(nginx).toMatch(/location = \/metrics \{ return 404; \}/);
    expect(nginx).toMatch(/location \/internal\/ \{ return 404; \}/);
  });
});

describe('Dockerfile', () => {
  it('is multi-stage and runs as the unprivileged node user', () => {
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(3);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runtime).toMatch(/^USER node$/m);
  });

  it('checks health on GET /healthz, a documented route', () => {
    expect(dockerfile).toMatch(/^HEALTHCHECK [\s\S]*\/healthz/m);
    expect(endpoints.some((r) => r.method === 'get' && r.path === '/healthz')).toBe(true);
  });

  it('runs the compiled build (as CI tests it), on a Node major of package.json', () => {
    expect(dockerfile).toMatch(/^RUN npm run build$/m);
    expect(dockerfile).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    expect(compose).toContain('command: ["node", "dist/main.js"]');
    const pkg = JSON.parse(read('package.json'));
    expect(pkg.scripts.build).toContain('tsconfig.build.json');
    expect(read('.ci/run')).toContain('PARLEY_TEST_BUILD=dist');
    const majors = [...(pkg.engines.node as string).matchAll(/(?:^|\|\|)\s*[\^>=~]*(\d+)/g)].map((m) => m[1]);
    const image = /^ARG NODE_VERSION=(\d+)$/m.exec(dockerfile)?.[1];
    expect(majors).toContain(image);
    expect(dockerfile).toMatch(/^EXPOSE 3000$/m);
  });

  it('.dockerignore keeps local data, secrets and dependencies out of the build context', () => {
    const ignored = read('.dockerignore').split('\n');
    for (const entry of ['.git', '.data', '.env', 'node_modules', 'test-results']) expect(ignored).toContain(entry);
  });
});

describe('.env.example', () => {
  const text = read('.env.example');
  const lines = text.split('\n');

  it('lists every variable of src/config.ts, each with a comment above it', () => {
    for (const key of CONFIG_VARIABLES) {
      const at = lines.findIndex((l) => l.startsWith(`${key}=`));
      expect(at, `${key} in .env.example`).toBeGreaterThan(0);
      expect(lines[at - 1], `a comment above ${key}`).toMatch(/^# /);
    }
  });

  it('is itself a valid (development) configuration', () => {
    const env = Object.fromEntries(
      lines
        .filter((l) => /^[A-Z][A-Z0-9_]*=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    const config = loadConfig(env);
    expect(config.env).toBe('development');
    expect(config.port).toBe(3000);
  });
});
