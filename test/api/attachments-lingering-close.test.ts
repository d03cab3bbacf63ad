import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LINGER_MS } from '../../src/http/linger.js';
import { visitorToken } from '../support/clients.js';
import { ALL_ON, attachmentsWorld, multipartFrame, setMerchant } from './attachments.fixtures.js';

/**
 * A refused upload's lingering close (docs/attachments.md "Upload", src/http/linger.ts), seen
 * from a raw socket that goes on sending its body the way a browser or fetch does: the answer is
 * read whole, the client's writes keep succeeding after it (no EPIPE/ECONNRESET), and the server
 * half-closes at once and closes within LINGER_MS. Without the half-close node destroyed the socket
 * as soon as the answer was written, and the client's next write met a reset. One storage driver:
 * the refusal comes before the body is read, so the storage is never reached.
 */
const BODY_WRITES_MS = 1500;
/** Room for a busy machine: the close is bounded, not timed. */
const CLOSE_MARGIN_MS = 8000;

interface Wire {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The HTTP answer at the start of `bytes`, once its whole body (Content-Length) is there. */
function answerIn(bytes: Buffer): Wire | undefined {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const at = line.indexOf(':');
    headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  const body = bytes.subarray(end + 4);
  if (body.length < Number(headers['content-length'])) return undefined;
  return { status: Number(statusLine?.split(' ')[1]), headers, body: body.toString('utf8') };
}

describe('a refused upload answers, then closes lingering', () => {
  const w = attachmentsWorld('local');

  it('a client still sending its body reads the whole refusal, writes on without a reset, and is closed within LINGER_MS', async () => {
    await setMerchant(w.t, 'demo', { switches: { ...ALL_ON }, fileMaxBytes: 5000 });
    const { token } = await visitorToken(w.t.url);
    const frame = multipartFrame({ kind: 'file' });
    // Half-open allowed: the server's FIN must not end our side, we go on writing as a client does.
    const socket = connect({ port: Number(new URL(w.t.url).port), host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    let answer: Wire | undefined;
    let answeredAt = 0;
    let finAt = 0;
    let failure: { at: number; code: string } | undefined;
    let writtenAfterAnswer = 0;
    const fail = (error: NodeJS.ErrnoException) => {
      failure ??= { at: Date.now(), code: error.code ?? error.message };
    };
    socket.on('data', (d: Buffer) => {
      received.push(d);
      if (answer) return;
      answer = answerIn(Buffer.concat(received));
      if (answer) answeredAt = Date.now();
    });
    socket.on('end', () => {
      finAt = Date.now();
    });
    socket.on('error', fail);
    let closedAt: number | undefined;
    const closed = new Promise<void>((resolve) =>
      socket.once('close', () => {
        closedAt = Date.now();
        resolve();
      }),
    );
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));

    try {
      // 50 MB announced, far over file_max_bytes: refused before a byte of the body is read.
      socket.write(
        `POST /visitor/upload?kind=file HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
          `Content-Type: ${frame.contentType}\r\nContent-Length: 50000000\r\n\r\n`,
      );
      socket.write(frame.head);
      // The body goes on: 64 KiB every 20 ms until BODY_WRITES_MS after the answer, then a little
      // every 100 ms until the server's close shows (a write met by a reset), well under 50 MB.
      const startedAt = Date.now();
      const giveUpAt = () => (answeredAt || startedAt) + LINGER_MS + CLOSE_MARGIN_MS;
      while (closedAt === undefined && !socket.destroyed && Date.now() < giveUpAt()) {
        const heavy = !answer || Date.now() - answeredAt < BODY_WRITES_MS;
        const afterAnswer = answer !== undefined;
        const chunk = Buffer.alloc(heavy ? 65536 : 512, 0x20);
        socket.write(chunk, (error) => {
          if (error) fail(error);
          else if (afterAnswer) writtenAfterAnswer += chunk.length;
        });
        await new Promise((r) => setTimeout(r, heavy ? 20 : 100));
      }
      await Promise.race([closed, new Promise((r) => setTimeout(r, 1000))]);

      // The whole answer: status line, headers, the {code, msg, data} envelope of the refusal.
      expect(answer?.status).toBe(413);
      expect(answer?.headers.connection).toBe('close');
      const envelope = JSON.parse(answer?.body ?? 'null');
      expect(Object.keys(envelope)).toEqual(['code', 'msg', 'data']);
      expect(envelope.code).toBe(1413);
      expect(envelope.msg).toContain('file_max_bytes');
      // Writes after the answer succeed for a while: no EPIPE/ECONNRESET in the first second.
      if (failure) expect(failure.at - answeredAt, `${failure.code} after the answer`).toBeGreaterThanOrEqual(1000);
      expect(writtenAfterAnswer).toBeGreaterThan(65536);
      // The server half-closes once the answer is written, and closes within LINGER_MS (and a margin).
      expect(finAt, 'FIN after the answer').toBeGreaterThanOrEqual(answeredAt);
      expect(closedAt, 'connection closed').toBeDefined();
      expect((closedAt ?? Number.POSITIVE_INFINITY) - answeredAt).toBeLessThanOrEqual(LINGER_MS + CLOSE_MARGIN_MS);
    } finally {
      socket.destroy();
    }
  });
});
