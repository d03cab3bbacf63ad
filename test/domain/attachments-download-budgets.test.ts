import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { DomainError } from '../../src/errors.js';
import {
  chargeDownload,
  type Downloader,
  downloaderOf,
  spendDownloadBytes,
} from '../../src/resolvers/attachments/download-budgets.js';
import type { AgentViewer, VisitorViewer } from '../../src/resolvers/viewer.js';
import type { RateLimiter, RateLimiterFactory } from '../../src/stores/rate-limits.js';
import { refusalOf, type TestDeps, useTestDeps } from '../support/deps.js';

/**
 * The download budgets (src/resolvers/attachments/download-budgets.ts) on the real rate-limit
 * store, by value: whose budget a request spends, each refusal's words and wait, what a download
 * announced, cut short or of unknown length spends, and what a refused one gives back.
 * test/api/attachments-download-budget.test.ts checks the same budgets through GET downloads.
 */
let deps: TestDeps;
useTestDeps((made) => ({ deps } = made));

/** The deps with these download budgets. */
const budgets = (downloadsPerMinute: number, downloadBytesPerHour: number): Deps => ({
  ...deps,
  config: { ...deps.config, attachments: { ...deps.config.attachments, downloadsPerMinute, downloadBytesPerHour } },
});

/** A downloader of its own (the store is shared by the file's tests). */
const agent = (): Downloader => downloaderOf({ kind: 'agent', agentId: randomUUID() } as AgentViewer, '10.0.0.1');
const address = (): Downloader => downloaderOf(undefined, `10.${Math.floor(Math.random() * 250)}.${randomUUID()}`);

/** The refusal's wait, checked against the words that say it. */
async function refusedWait(work: Promise<unknown>, words: string, window: number): Promise<number> {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  const { code, message, retryAfterSeconds } = error as DomainError;
  expect(code).toBe('RATE_LIMITED');
  expect(message).toBe(`${words}, retry in ${retryAfterSeconds} s`);
  expect(retryAfterSeconds).toBeGreaterThan(0);
  expect(retryAfterSeconds).toBeLessThanOrEqual(window);
  return retryAfterSeconds as number;
}

describe('whose budget', () => {
  it('an agent’s Session spends the agent’s; a visitor token or nothing spends the client address’s', () => {
    const viewer = { kind: 'agent', agentId: 'ag_1' } as AgentViewer;
    expect(downloaderOf(viewer, '10.0.0.9')).toEqual({ subject: 'a:ag_1', holder: 'agent' });
    const visitor = { kind: 'visitor', visitorId: 'v_1', agentId: 'ag_1' } as unknown as VisitorViewer;
    expect(downloaderOf(visitor, '10.0.0.9')).toEqual({ subject: 'ip:10.0.0.9', holder: 'client address' });
    expect(downloaderOf(undefined, '::1')).toEqual({ subject: 'ip:::1', holder: 'client address' });
  });
});

describe('requests a minute', () => {
  it('the budget’s requests pass, the next is refused with its wait; another holder keeps its own', async () => {
    const limited = budgets(3, 1_000_000);
    const who = address();
    for (let i = 0; i < 3; i++) await chargeDownload(limited, who);
    await refusedWait(
      chargeDownload(limited, who),
      'Too many downloads: at most 3 a minute per client address (ATTACHMENT_DOWNLOADS_PER_MINUTE)',
      60,
    );
    const other = agent();
    await chargeDownload(budgets(1, 1_000_000), other);
    expect(await refusalOf(chargeDownload(budgets(1, 1_000_000), other))).toMatch(
      /^RATE_LIMITED: Too many downloads: at most 1 a minute per agent \(ATTACHMENT_DOWNLOADS_PER_MINUTE\), retry in \d+ s$/,
    );
    await chargeDownload(limited, address());
  });
});

describe('bytes an hour', () => {
  const words = (holder: string) =>
    `Download budget used up: at most 1000 bytes an hour per ${holder} (ATTACHMENT_DOWNLOAD_BYTES_PER_HOUR)`;

  it('an announced length is spent up front; past the budget it is refused and spends nothing', async () => {
    const limited = budgets(100, 1000);
    const who = agent();
    const settle = await spendDownloadBytes(limited, who, 600);
    await settle(600);
    await refusedWait(spendDownloadBytes(limited, who, 401), words('agent'), 3600);
    // The refused 401 bytes were given back: exactly the rest of the budget still passes.
    await (await spendDownloadBytes(limited, who, 400))(400);
    await refusedWait(spendDownloadBytes(limited, who, 1), words('agent'), 3600);
  });

  it('a download cut short gives back what it did not send', async () => {
    const limited = budgets(100, 1000);
    const who = address();
    await (await spendDownloadBytes(limited, who, 1000))(250);
    await (await spendDownloadBytes(limited, who, 750))(750);
    await refusedWait(spendDownloadBytes(limited, who, 1), words('client address'), 3600);
  });

  it('an empty range spends nothing and gives nothing back', async () => {
    const limited = budgets(100, 1000);
    const who = address();
    await (await spendDownloadBytes(limited, who, 0))(0);
    await (await spendDownloadBytes(limited, who, 1000))(1000);
    await refusedWait(spendDownloadBytes(limited, who, 1), words('client address'), 3600);
  });

  it('no length known: refused only once the budget is spent, its bytes counted after the fact', async () => {
    const limited = budgets(100, 1000);
    const who = agent();
    const settle = await spendDownloadBytes(limited, who, undefined);
    await settle(0);
    await (await spendDownloadBytes(limited, who, 999))(999);
    // A byte left: a thumbnail still goes, and its bytes overrun the budget without an error (the
    // download was made); the next one is refused.
    await (await spendDownloadBytes(limited, who, undefined))(10);
    await refusedWait(spendDownloadBytes(limited, who, undefined), words('agent'), 3600);
    await refusedWait(spendDownloadBytes(limited, who, 1), words('agent'), 3600);
  });

  it('a download that sends more than it announced is charged what it announced, no more', async () => {
    const limited = budgets(100, 1000);
    const who = address();
    await (await spendDownloadBytes(limited, who, 100))(110);
    await (await spendDownloadBytes(limited, who, 900))(900);
    await refusedWait(spendDownloadBytes(limited, who, 1), words('client address'), 3600);
  });

  describe('a failure that is not a refusal (the store, or any other error) goes to the caller, and nothing is given back', () => {
    const failures = [new Error('store down'), new DomainError('SERVICE_UNAVAILABLE', 'store down')];
    /** A limiter whose every count fails with `failure`, recording what is given back. */
    const failingWith = (failure: Error) => {
      const rewarded: number[] = [];
      const limiter: RateLimiter = {
        consume: async () => {
          throw failure;
        },
        isBlocked: async () => 0,
        reset: async () => {},
        reward: async (_subject, points = 1) => {
          rewarded.push(points);
        },
      };
      const rateLimiter: RateLimiterFactory = Object.assign(() => limiter, {
        consumeInOrder: async () => {
          throw failure;
        },
      });
      return { deps: { ...budgets(100, 1000), rateLimiter }, rewarded };
    };

    it.each(failures)('counting a thumbnail’s bytes after the fact: %s', async (failure) => {
      const { deps: failing, rewarded } = failingWith(failure);
      const settle = await spendDownloadBytes(failing, agent(), undefined);
      await expect(settle(10)).rejects.toBe(failure);
      expect(rewarded).toEqual([]);
    });

    it.each(failures)('spending an announced length: %s', async (failure) => {
      const { deps: failing, rewarded } = failingWith(failure);
      await expect(spendDownloadBytes(failing, agent(), 500)).rejects.toBe(failure);
      expect(rewarded).toEqual([]);
    });
  });
});
