import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';

/** The same deps with some chat limits lowered, so a budget test reaches them in a few calls. */
export const withChatLimits = (deps: Deps, chatLimits: Partial<Deps['config']['chatLimits']>): Deps => ({
  ...deps,
  config: { ...deps.config, chatLimits: { ...deps.config.chatLimits, ...chatLimits } },
});

/** 'answered', or the refusal's code and wait (a DomainError); anything else is rethrown. */
export const answerOrRefusal = (work: Promise<unknown>) =>
  work.then(
    () => 'answered' as const,
    (e: unknown) => {
      if (e instanceof DomainError) return { code: e.code, retryAfter: e.retryAfterSeconds };
      throw e;
    },
  );
