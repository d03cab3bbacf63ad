// @ts-check
/**
 * Mutation testing of the whole gateway (`npm run mutation`, scripts/mutation.mjs; docs/testing.md
 * "Mutation testing"). The mutated set is split in parts, one Stryker run each, so a part can be run
 * alone, incrementally, and on a busy machine one after the other; scripts/mutation.mjs merges the
 * parts' reports into reports/mutation/mutation.json (not committed). PARLEY_MUTATION_PART picks the
 * part (default `domain`), so `npx stryker run` alone is the domain run it always was.
 *
 * - The domain (src/resolvers/, the bus) runs the domain-level tests (vitest.mutation.config.ts).
 * - The adapters (src/rest/, src/schema/, src/subscriptions/, src/http/, src/stores/, the pages'
 *   routes) run those plus the transport unit tests and the API tests, which start the gateway
 *   in-process (vitest.mutation-adapters.config.ts).
 * - `postgres` mutates the files whose rules only PostgreSQL can break (the seq under the
 *   conversation's row lock, one open conversation per visitor, the compare-and-set claims, the
 *   outbox's order) and runs the domain tests on PostgreSQL, where the two-instance tests run
 *   (they skip on the embedded store: PGlite is one connection). It needs DATABASE_URL.
 */

export const ADAPTER_TEST_TIMEOUT_MS = '15000';

/**
 * Test processes per part. The domain's tests are CPU-bound (PGlite runs in the test process): on
 * two cores, 3 or 4 processes take as long as 2 (src/resolvers/presence.ts: 227 s at 3, 224 s at 2)
 * and time out tests a mutant did not break. The API tests wait on sockets and HTTP round trips,
 * and 4 processes keep both cores busy: the same mutants killed, none more timed out, the mutants
 * tested 1.5–1.7 times as fast (docs/testing.md "Test processes per part").
 */
const DOMAIN_CONCURRENCY = 2;
const ADAPTER_CONCURRENCY = 4;

/** test/api files by name. */
const api = (/** @type {string[]} */ ...names) => names.map((n) => `test/api/${n}.test.ts`);

/**
 * `tests`: the test files a part runs (its vitest config's set otherwise). Every part pays one
 * instrumented run of its tests before the first mutant, and a mutant no test kills runs every test
 * that reaches it: with the whole API suite, a survivor in a helper every request passes through
 * (src/http/request.ts) cost a run of the whole suite, and the `http` part managed 191 of 572
 * mutants in 27 minutes on the busy machine. So each adapter part names the API tests of its folder.

 * @type {Record<string, { mutate: string[], vitestConfig: string, concurrency: number, tests?: string[] }>}
 */
export const parts = {
  domain: {
    mutate: ['src/resolvers/**/*.ts', 'src/stores/bus*.ts'],
    vitestConfig: 'vitest.mutation.config.ts',
    concurrency: DOMAIN_CONCURRENCY,
  },
  rest: {
    mutate: ['src/rest/**/*.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    concurrency: ADAPTER_CONCURRENCY,
    tests: api(
      'differential',
      'chat-api',
      'desk-admin',
      'desk-tools',
      'api-keys',
      'api-keys-surface',
      'bootstrap-*',
      'attachments-upload',
      'attachments-download',
      'webhooks',
      'bots',
      'openapi',
      'security-input',
      'hardening-chat',
      'hardening-visitor',
      'rest-edges',
      'visitor-token-failures',
      'chat-fair-share',
      'visitor-refusal-delay',
      'attachments-abuse',
      'attachments-download-budget',
      'attachments-lingering-close',
    ),
  },
  schema: {
    mutate: ['src/schema/**/*.ts', '!src/schema/print.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    concurrency: ADAPTER_CONCURRENCY,
    tests: [
      'test/unit/graphql-direct.test.ts',
      'test/unit/graphql-schema-edges.test.ts',
      ...api(
        'differential',
        'graphql-writes',
        'graphql-http-edges',
        'graphql-normalization',
        'security-graphql',
        'bootstrap-queries',
        'event-payloads',
        'chat-api',
        'realtime',
        'desk-admin',
        'bots',
        'webhooks',
      ),
    ],
  },
  subscriptions: {
    mutate: ['src/subscriptions/**/*.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    concurrency: ADAPTER_CONCURRENCY,
    tests: [
      'test/unit/**/*.test.ts',
      ...api(
        'realtime',
        'realtime-limits',
        'pusher',
        'pusher-protocol-edges',
        'pusher-upgrade-lookups',
        'pusher-capability-cap',
        'transport-edges',
        'graphql-ws-edges',
        'graphql-ws-lifecycle',
        'pusher-early-messages',
        'pusher-agent-edges',
        'security-websocket',
        'client-resume',
        'clients-resume-libraries',
      ),
    ],
  },
  http: {
    mutate: ['src/http/**/*.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    concurrency: ADAPTER_CONCURRENCY,
    tests: [
      'test/unit/http-edges.test.ts',
      'test/unit/session-store.test.ts',
      ...api(
      'front-door',
      'slow-headers',
      'hardening-http',
      'hardening-cors-csrf',
      'clients-csrf',
      'security-graphql',
      'graphql-normalization',
      'identity-one',
      'hardening-login',
      'security-input',
      'auth-sessions',
      'attachments-lingering-close',
      ),
    ],
  },
  stores: {
    mutate: ['src/stores/**/*.ts', '!src/stores/bus*.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    // Its mutants are reached mostly by the domain tests, on PGlite.
    concurrency: DOMAIN_CONCURRENCY,
    tests: [
      'test/domain/**/*.test.ts',
      'test/unit/storage-drivers.test.ts',
      'test/unit/stores-contract.test.ts',
      ...api('attachments-storage-edges', 'attachments-download', 'attachments-upload', 'config-cache'),
    ],
  },
  pages: {
    mutate: ['src/pages/routes.ts'],
    vitestConfig: 'vitest.mutation-adapters.config.ts',
    concurrency: ADAPTER_CONCURRENCY,
    // The pages' routes are reached over HTTP only (the browser tests are not in a mutant's run).
    tests: ['test/api/pages-http.test.ts', 'test/api/widget.test.ts', 'test/api/hardening-http.test.ts'],
  },
  postgres: {
    mutate: [
      'src/resolvers/chat-rows.ts',
      'src/resolvers/messages/**/*.ts',
      'src/resolvers/conversations/assignment.ts',
      'src/resolvers/conversations/context.ts',
      'src/resolvers/conversations/queue.ts',
      'src/resolvers/outbox/**/*.ts',
      'src/resolvers/integration/bots/handoff.ts',
    ],
    vitestConfig: 'vitest.mutation.config.ts',
    concurrency: DOMAIN_CONCURRENCY,
    // The domain tests of these files, the two-instance ones among them (they run on PostgreSQL only).
    tests: [
      'test/domain/chat-messages.test.ts',
      'test/domain/chat-conversations.test.ts',
      'test/domain/chat-publication.test.ts',
      'test/domain/outbox.test.ts',
      'test/domain/conversations.test.ts',
      'test/domain/integration/bots.test.ts',
    ],
  },
};

const name = process.env.PARLEY_MUTATION_PART || 'domain';
const part = parts[name];
if (!part) throw new Error(`PARLEY_MUTATION_PART=${name}: no such part (${Object.keys(parts).join(', ')})`);
if (name === 'postgres' && !process.env.DATABASE_URL)
  throw new Error('PARLEY_MUTATION_PART=postgres runs the domain tests on PostgreSQL: set DATABASE_URL');
// API tests take longer than domain tests: a mutant's test fails after this, not after 5 s
// (scripts/vitest-kept-worker.mjs), so a busy machine does not count a slow test as a kill.
if (part.vitestConfig === 'vitest.mutation-adapters.config.ts')
  process.env.PARLEY_MUTANT_TEST_TIMEOUT_MS ??= ADAPTER_TEST_TIMEOUT_MS;
/**
 * A targeted run may narrow the part's tests to a few files (PARLEY_MUTATION_TESTS_ONLY, comma-separated
 * globs), for a quick look at what those tests alone kill: a mutant the part's other tests reach costs
 * a run of each of them (on the `subscriptions` part, every WebSocket and Pusher test). Its score is a
 * lower bound for the files it mutates, so its report goes to <part>.narrowed.json, which the merged
 * report (scripts/mutation.mjs) leaves out.
 */
const narrowed = process.env.PARLEY_MUTATION_TESTS_ONLY?.split(',').filter(Boolean);
const tests = narrowed?.length ? narrowed : part.tests;
const reportName = narrowed?.length ? `${name}.narrowed` : name;
// Read by vitest.mutation.config.ts in Stryker's test processes, which inherit this environment.
if (tests) process.env.PARLEY_MUTATION_TESTS = tests.join(',');

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: part.vitestConfig },
  mutate: part.mutate,
  // Documentation and log text are not mutated (scripts/stryker-text-ignorer.mjs says why).
  plugins: ['@stryker-mutator/*', './scripts/stryker-text-ignorer.mjs'],
  ignorers: ['documentation-and-logs'],
  coverageAnalysis: 'perTest',
  // Static mutants (code run only while modules load or while a test file's `beforeAll` starts
  // the gateway: the event catalog's schemas, zod contracts, the REST route table, the GraphQL
  // type declarations, constants) each need every test re-run in a fresh process: they would take
  // the run far past its hour here. They are reported as ignored, and are not in the score's
  // denominator; a mutant that a test also reaches at run time is still tested ("hybrid").
  ignoreStatic: true,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: `reports/mutation/parts/${reportName}.json` },
  // `--incremental` (scripts/mutation.mjs passes it on) re-tests only the mutants whose code or
  // covering tests changed since this part's last run.
  incrementalFile: `reports/mutation/parts/${reportName}.incremental.json`,
  // `--concurrency N` (scripts/mutation.mjs passes it on) overrides it.
  concurrency: part.concurrency,
  // On top of 1.5x the covering tests' own time: enough for a slow machine, short enough that a
  // mutant that hangs (a loop, a lost wake-up) costs seconds, not half a minute.
  timeoutMS: 5_000,
  // The initial run (every test of the part, instrumented) takes minutes on a loaded machine; Stryker's default allows 5.
  dryRunTimeoutMinutes: 30,
  // One sandbox per part: two parts may run at once.
  tempDirName: `.stryker-tmp/${name}`,
  ignorePatterns: ['.data', 'dist', 'reports', 'coverage', 'test-results', '.scratch', 'bench', 'examples', '.stryker-tmp'],
  cleanTempDir: 'always',
};
