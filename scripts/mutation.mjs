// @ts-check
/**
 * `npm run mutation [-- <part>… ] [--incremental] [--concurrency N] [--report-only]`: Stryker over
 * the whole gateway, one part after the other (stryker.config.mjs `parts`), then one report.
 *
 * Each part writes reports/mutation/parts/<part>.json; this script merges every part's report that
 * exists into reports/mutation/mutation.json (Stryker's mutation-testing-report schema, one entry per
 * source file) and prints the score per folder and overall. A file mutated by two parts (the
 * `postgres` part re-runs the concurrency files on PostgreSQL) counts once: a mutant is detected if
 * either run detected it. Without DATABASE_URL the `postgres` part is skipped and said so.
 *
 *   npm run mutation                         # every part (`postgres` only with DATABASE_URL)
 *   npm run mutation -- http rest            # those parts, then the merged report
 *   npm run mutation -- --incremental        # re-test only what changed since each part's last run
 *   npm run mutation -- --report-only        # merge and print the parts' reports as they are
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parts } from '../stryker.config.mjs';

const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith('--')));
const concurrencyAt = args.indexOf('--concurrency');
const concurrency = concurrencyAt >= 0 ? args[concurrencyAt + 1] : undefined;
const named = args.filter((a, i) => !a.startsWith('--') && (concurrencyAt < 0 || i !== concurrencyAt + 1));
for (const n of named) if (!(n in parts)) throw new Error(`no part ${n} (${Object.keys(parts).join(', ')})`);
const chosen = named.length ? named : Object.keys(parts);

const PARTS_DIR = 'reports/mutation/parts';
const started = Date.now();
/** @type {Record<string, number>} wall seconds per part run now */
const took = {};

if (!flags.has('--report-only')) {
  for (const name of chosen) {
    if (name === 'postgres' && !process.env.DATABASE_URL) {
      console.log('[mutation] part postgres skipped: it runs the domain tests on PostgreSQL, set DATABASE_URL');
      continue;
    }
    const t0 = Date.now();
    console.log(`[mutation] part ${name}: ${parts[name].mutate.join(' ')}`);
    const run = spawnSync(
      'npx',
      [
        'stryker',
        'run',
        ...(flags.has('--incremental') ? ['--incremental'] : []),
        ...(concurrency ? ['--concurrency', concurrency] : []),
      ],
      { stdio: 'inherit', env: { ...process.env, PARLEY_MUTATION_PART: name } },
    );
    took[name] = Math.round((Date.now() - t0) / 1000);
    console.log(`[mutation] part ${name}: ${took[name]} s wall, exit ${run.status}`);
    if (run.status !== 0) process.exitCode = 1;
  }
}

/** Mutation-testing-report statuses that count as detected, and those outside the score. */
const DETECTED = new Set(['Killed', 'Timeout']);
const UNDETECTED = new Set(['Survived', 'NoCoverage']);
/** @typedef {any} Mutant */
const keyOf = (/** @type {Mutant} */ m) =>
  `${m.mutatorName}|${m.replacement}|${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}`;

/** @type {{ schemaVersion: string, thresholds: unknown, files: Record<string, { language: string, source: string, mutants: Mutant[] }>, config?: unknown }} */
const merged = { schemaVersion: '1.0', thresholds: { high: 80, low: 60 }, files: {} };
/** @type {string[]} */
const included = [];
for (const name of Object.keys(parts)) {
  const file = `${PARTS_DIR}/${name}.json`;
  if (!existsSync(file)) continue;
  included.push(name);
  const report = JSON.parse(readFileSync(file, 'utf8'));
  merged.schemaVersion = report.schemaVersion ?? merged.schemaVersion;
  for (const [path, entry] of Object.entries(report.files)) {
    const into = merged.files[path];
    if (!into) {
      merged.files[path] = { ...entry, mutants: entry.mutants.map((/** @type {Mutant} */ m) => ({ ...m })) };
      continue;
    }
    const byKey = new Map(into.mutants.map((/** @type {Mutant} */ m) => [keyOf(m), m]));
    for (const m of entry.mutants) {
      const have = byKey.get(keyOf(m));
      if (!have) into.mutants.push({ ...m, id: `${name}-${m.id}` });
      else if (DETECTED.has(m.status) && !DETECTED.has(have.status)) Object.assign(have, { ...m, id: have.id });
    }
  }
}
if (!included.length) {
  console.log(`[mutation] no part reports under ${PARTS_DIR}`);
  process.exit(process.exitCode ?? 0);
}
mkdirSync('reports/mutation', { recursive: true });
writeFileSync('reports/mutation/mutation.json', JSON.stringify(merged));

/** The folder a file is reported under: its first two path segments (src/rest, src/pages/routes.ts). */
const folderOf = (/** @type {string} */ path) => {
  const segments = path.split('/');
  return segments.length > 2 ? segments.slice(0, 2).join('/') : path;
};
/** @type {Map<string, Record<string, number>>} */
const counts = new Map();
const add = (/** @type {string} */ folder, /** @type {string} */ status) => {
  const c = counts.get(folder) ?? {};
  c[status] = (c[status] ?? 0) + 1;
  counts.set(folder, c);
};
for (const [path, entry] of Object.entries(merged.files))
  for (const m of entry.mutants) {
    add(path.startsWith('src/stores/bus') ? 'src/stores (bus)' : folderOf(path), m.status);
    add('all', m.status);
  }
const score = (/** @type {Record<string, number>} */ c) => {
  let detected = 0;
  let undetected = 0;
  for (const [status, n] of Object.entries(c)) {
    if (DETECTED.has(status)) detected += n;
    if (UNDETECTED.has(status)) undetected += n;
  }
  return { detected, undetected, score: detected + undetected ? (100 * detected) / (detected + undetected) : 100 };
};
console.log(`\n[mutation] reports/mutation/mutation.json from parts: ${included.join(', ')}`);
console.log('| folder | score | killed | timeout | survived | no coverage | ignored |');
console.log('|---|---|---|---|---|---|---|');
for (const [folder, c] of [...counts].sort(([a], [b]) => (a === 'all' ? 1 : b === 'all' ? -1 : a.localeCompare(b)))) {
  const s = score(c);
  console.log(
    `| ${folder} | ${s.score.toFixed(2)} % | ${c.Killed ?? 0} | ${c.Timeout ?? 0} | ${c.Survived ?? 0} | ${c.NoCoverage ?? 0} | ${c.Ignored ?? 0} |`,
  );
}
if (Object.keys(took).length)
  console.log(
    `[mutation] ${Object.entries(took)
      .map(([n, s]) => `${n} ${s} s`)
      .join(', ')}; ${Math.round((Date.now() - started) / 1000)} s wall in all`,
  );

// A survivor that completed no test was not tested at all (its tests failed to collect, or none was
// selected): a defect of the run, not of the tests, so it is named rather than silently scored.
const untested = Object.entries(merged.files).flatMap(([path, entry]) =>
  entry.mutants
    .filter((/** @type {Mutant} */ m) => m.status === 'Survived' && m.testsCompleted === 0)
    .map((/** @type {Mutant} */ m) => `${path}:${m.location.start.line}:${m.location.start.column}`),
);
if (untested.length)
  console.log(
    `[mutation] warning: ${untested.length} survivors completed no test (${untested.slice(0, 5).join(', ')}${untested.length > 5 ? ', …' : ''}); re-run their files`,
  );

// Where a run's time goes: a killed mutant stops at its first failing test, a survivor runs every
// test that reaches it, so a survivor on a path every test takes (a factory's merchant, a visitor
// token) costs a run of the whole part. Tests completed stand in for time (Stryker records no
// duration per mutant); the costliest survivors are the first to kill or to explain.
/** @type {{ where: string, tests: number }[]} */
const survivors = [];
const testsBy = { detected: 0, undetected: 0 };
for (const [path, entry] of Object.entries(merged.files))
  for (const m of entry.mutants) {
    const tests = m.testsCompleted ?? 0;
    if (DETECTED.has(m.status)) testsBy.detected += tests;
    if (UNDETECTED.has(m.status)) {
      testsBy.undetected += tests;
      survivors.push({
        where: `${path}:${m.location.start.line} ${m.mutatorName} → ${JSON.stringify(m.replacement ?? '').slice(0, 40)}`,
        tests,
      });
    }
  }
const testsInAll = testsBy.detected + testsBy.undetected;
if (testsInAll) {
  console.log(
    `[mutation] tests completed: ${testsInAll}, ${Math.round((100 * testsBy.undetected) / testsInAll)} % of them for undetected mutants; the costliest:`,
  );
  for (const s of survivors.sort((a, b) => b.tests - a.tests).slice(0, 10))
    console.log(`  ${s.tests} tests  ${s.where}`);
}
