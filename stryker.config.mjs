// @ts-check
/**
 * Mutation testing of the domain rules (`npm run mutation`): Stryker mutates src/resolvers/ and
 * the event bus, and runs the fast domain-level tests against each mutant, on a vitest pool that
 * keeps its worker thread from one mutant to the next (vitest.mutation.config.ts). Too slow for CI; run it before resolving a change to the rules. The JSON report goes
 * to reports/mutation/mutation.json (not committed).
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  mutate: ['src/resolvers/**/*.ts', 'src/stores/bus*.ts'],
  // Documentation and log text are not mutated (scripts/stryker-text-ignorer.mjs says why).
  plugins: ['@stryker-mutator/*', './scripts/stryker-text-ignorer.mjs'],
  ignorers: ['documentation-and-logs'],
  coverageAnalysis: 'perTest',
  // Static mutants (module-level code: the event catalog's schemas, zod contracts, constants)
  // each need every test re-run in a fresh environment: half the run time for a sixth of the
  // mutants, which would take a run far past 30 minutes here. They are reported as ignored.
  ignoreStatic: true,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  // This machine has two cores, shared.
  concurrency: 2,
  // On top of 1.5x the covering tests' own time: enough for a slow machine, short enough that a
  // mutant that hangs (a loop, a lost wake-up) costs seconds, not half a minute.
  timeoutMS: 5_000,
  // The initial run (every domain test, instrumented) takes minutes on a loaded machine; Stryker's default allows 5.
  dryRunTimeoutMinutes: 30,
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['.data', 'dist', 'reports', 'coverage', 'test-results', '.scratch', 'bench', 'examples'],
  cleanTempDir: 'always',
};
