import { describe, expect, it } from 'vitest';
import { noteSessionSeen, SEEN_REFRESH_MS, type SessionClient } from '../../src/resolvers/session.js';
import { testSession } from '../support/deps.js';

/**
 * A Session's latest use (`seen`, shown in the Session list) by value: written on a request's
 * first use, then only when a minute has passed or the address or the device changed, so a busy
 * agent's requests do not rewrite the stored Session each time.
 */
const T0 = 1_700_000_000_000;
const OFFICE: SessionClient = { address: '10.0.0.1', device: 'Firefox' };

/** A Session port of a request from `client`. */
const portFrom = (client: SessionClient | undefined, seen?: { address: string; device: string; at: number }) =>
  Object.assign(testSession(seen ? { seen } : {}), { client });

describe('noteSessionSeen', () => {
  it('records a request’s first use; outside a request (no client) records nothing', () => {
    const port = portFrom(OFFICE);
    noteSessionSeen(port, T0);
    expect(port.state.seen).toEqual({ address: '10.0.0.1', device: 'Firefox', at: T0 });
    const socket = portFrom(undefined);
    noteSessionSeen(socket, T0);
    expect(socket.state).toEqual({});
  });

  it('keeps the record within the minute, refreshes it at the minute', () => {
    const seen = { ...OFFICE, at: T0 };
    const port = portFrom(OFFICE, seen);
    noteSessionSeen(port, T0 + SEEN_REFRESH_MS - 1);
    expect(port.state.seen).toBe(seen);
    noteSessionSeen(port, T0 + SEEN_REFRESH_MS);
    expect(port.state.seen).toEqual({ ...OFFICE, at: T0 + SEEN_REFRESH_MS });
    expect(SEEN_REFRESH_MS).toBe(60_000);
  });

  it.each([
    ['address', { address: '10.0.0.2', device: 'Firefox' }],
    ['device', { address: '10.0.0.1', device: 'Chrome' }],
  ])('a new %s is recorded at once', (_what, client) => {
    const port = portFrom(client, { ...OFFICE, at: T0 });
    noteSessionSeen(port, T0 + 1);
    expect(port.state.seen).toEqual({ ...client, at: T0 + 1 });
  });
});
