import { expect } from 'vitest';
import WebSocket from 'ws';
import { HttpClient } from './clients.js';
import { INTERNAL_TOKEN } from './test-app.js';

/**
 * What the resume tests of every client kind share: sockets they can cut under a client, and a
 * numbered stream of events published through POST /internal/events.
 */

/** Every WebSocket a client opened through `RecordedWebSocket`, so a test can cut the network under it. */
export const recordedSockets = new Set<WebSocket>();
export const recorded = { pongs: 0 };
export class RecordedWebSocket extends WebSocket {
  constructor(address: string, protocols?: string | string[]) {
    super(address, protocols);
    recordedSockets.add(this);
    this.on('close', () => recordedSockets.delete(this));
    this.on('message', (data) => {
      if ((JSON.parse(String(data)) as { type: string }).type === 'pong') recorded.pongs += 1;
    });
  }
}

/** Drops every open recorded socket without a close handshake, as a network failure would. */
export function cutNetwork() {
  const cut = recordedSockets.size;
  for (const socket of recordedSockets) socket.terminate();
  return cut;
}

export const openSockets = () => [...recordedSockets].filter((s) => s.readyState === WebSocket.OPEN).length;

/** Publishes `test.count` event number `n` on `channel`; answers its id. */
export async function publishCount(url: string, channel: string, n: number) {
  const { status, body } = await new HttpClient(url).json<{ id: string }>('/internal/events', {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
    json: { channel, event: 'test.count', data: { n } },
  });
  expect(status).toBe(202);
  return body.data.id;
}

export const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** A chat message as REST answers it and `message.created` carries it (snake_case). */
export interface WireMessage {
  id: string;
  seq: number;
  content: string;
  sender_type: string;
}

/** What a chat window shows: messages by id (live events and reloads merged), and how often one came twice live. */
export function chatWindow() {
  const shown = new Map<string, WireMessage>();
  const liveIds = new Set<string>();
  let repeatedLive = 0;
  return {
    shown,
    live(message: WireMessage) {
      if (liveIds.has(message.id)) repeatedLive += 1;
      liveIds.add(message.id);
      shown.set(message.id, message);
    },
    merge(messages: WireMessage[]) {
      for (const m of messages) shown.set(m.id, m);
    },
    repeatedLive: () => repeatedLive,
    /** The highest `seq` up to which every message is shown (0 when none): where a reload starts. */
    completeUpTo() {
      const seqs = new Set([...shown.values()].map((m) => m.seq));
      let seq = 0;
      while (seqs.has(seq + 1)) seq += 1;
      return seq;
    },
    contents: (sender: string) =>
      [...shown.values()]
        .filter((m) => m.sender_type === sender)
        .sort((a, b) => a.seq - b.seq)
        .map((m) => m.content),
  };
}
