import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { frameWriter, textFrame } from '../../src/subscriptions/fanout/frames.js';

describe('pre-built text frames (src/subscriptions/fanout/frames.ts textFrame)', () => {
  it('a ws client reads each as the text message it encodes, at every length encoding (7-bit, 16-bit, 64-bit)', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    try {
      await once(wss, 'listening');
      const serverSide = once(wss, 'connection');
      const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
      const [socket] = (await serverSide) as [WebSocket];
      const received: string[] = [];
      client.on('message', (data, binary) => received.push(binary ? 'binary!' : String(data)));
      const cases = [
        ['', 'x', ''],
        ['{"id":"é1","type":"next","payload":', JSON.stringify({ text: 'a'.repeat(200) }), '}'],
        ['{"id":"2","type":"next","payload":', JSON.stringify({ text: 'ü'.repeat(40_000) }), '}'],
      ] as const;
      // The fan-out's fast path applies to an idle server socket of the installed ws.
      const writer = frameWriter(socket);
      expect(writer).toBeDefined();
      for (const [before, payload, after] of cases) writer?.write(textFrame(before, Buffer.from(payload), after));
      const deadline = Date.now() + 5000;
      while (received.length < cases.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(received).toEqual(cases.map(([before, payload, after]) => before + payload + after));
      client.close();
    } finally {
      wss.close();
    }
  });
});
