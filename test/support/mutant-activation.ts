import { inject } from 'vitest';

/**
 * A setup file of the mutation run only (vitest.mutation.config.ts), after Stryker's own. Stryker
 * activates a runtime mutant in a `beforeAll` and never deactivates it, so the mutant of one test
 * file stayed active while the next file was collected (and, in a kept thread, while the next run
 * collected its first file). A file that calls the mutated code while it is collected (a
 * `describe` that builds a Session layer or reads the OpenAPI document) then failed to collect:
 * its tests never ran, and a mutant no other test failed counted as survived with no test
 * completed. Deactivated here, before every file is collected, a runtime mutant is active only
 * from the file's `beforeAll` on, as Stryker means it; a static one (activated while modules load)
 * is left alone.
 */
const provided = inject as (key: string) => unknown;
if (provided('mode') === 'mutant' && provided('mutantActivation') === 'runtime') {
  const namespace = provided('globalNamespace');
  const stryker =
    typeof namespace === 'string'
      ? (globalThis as unknown as Record<string, { activeMutant?: unknown } | undefined>)[namespace]
      : undefined;
  if (stryker) stryker.activeMutant = undefined;
}
