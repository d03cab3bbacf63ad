import type { ChannelSubscription } from '../fanout.js';
import { MAX_BUFFERED_BYTES } from '../limits.js';

/**
 * The bytes of the fan-out, apart from who gets them: an event serialized once per frame format,
 * the WebSocket frame built once from it, and the write of that frame to one subscriber's socket.
 */

/**
 * One serialized event of one format, shared by a walk's subscriptions: its text, its UTF-8 bytes
 * (encoded once, when first needed), and the last WebSocket frame built from it (with the
 * before/after it was built for: subscriptions with the same operation id share the frame).
 */
export interface Payload {
  readonly text: string;
  bytes(): Buffer;
  before?: string;
  after?: string;
  frame?: Buffer;
}

export function payloadOf(text: string | undefined): Payload | undefined {
  if (text === undefined) return undefined;
  let bytes: Buffer | undefined;
  return { text, bytes: () => (bytes ??= Buffer.from(text)) };
}

/** What the pre-framed write reads of a `ws` WebSocket (ws 8 internals): its TCP socket and its sender's state. */
interface WsInternals {
  _socket?: { write(frame: Buffer): boolean };
  _sender?: { _state: number; _queue: unknown[] };
}
/** ws's Sender state when it is not deflating or reading a Blob (nothing may be queued ahead of a frame). */
const SENDER_IDLE = 0;

/**
 * The TCP socket a pre-built frame may be written to directly: when ws's sender is idle with
 * nothing queued (a frame written past a queued one would overtake it). Undefined otherwise, and
 * on a `ws` whose internals differ (test/unit/fanout-frame.test.ts fails then, rather than every
 * delivery silently taking the slower `send`).
 */
export function frameWriter(socket: unknown): { write(frame: Buffer): boolean } | undefined {
  const raw = socket as WsInternals;
  return raw._socket && raw._sender?._state === SENDER_IDLE && raw._sender._queue.length === 0
    ? raw._socket
    : undefined;
}

/**
 * A final, unmasked text frame (RFC 6455 §5.2) of `before` + payload + `after`, built once and
 * written as is to every socket it suits: one write per socket, where ws's `send` would encode
 * the string, allocate a header and write both (corked) for each socket. Server frames are never
 * masked, so the bytes are the same for every socket.
 */
export function textFrame(before: string, payload: Buffer, after: string): Buffer {
  const beforeBytes = Buffer.byteLength(before);
  const length = beforeBytes + payload.length + Buffer.byteLength(after);
  const header = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(header + length);
  frame[0] = 0x81; // FIN, text
  if (length < 126) frame[1] = length;
  else if (length < 65_536) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
    frame.writeUInt32BE(length >>> 0, 6);
  }
  frame.write(before, header);
  payload.copy(frame, header + beforeBytes);
  frame.write(after, header + beforeBytes + payload.length);
  return frame;
}

/**
 * Writes one frame of `payload` to `sub`'s socket (the shared pre-built frame when ws is idle,
 * else ws's `send`). True when the socket now holds more than MAX_BUFFERED_BYTES unsent: a slow
 * consumer, for the caller to end. Nothing is written to a socket that is not open.
 */
export function writeFrame(sub: ChannelSubscription, payload: Payload): boolean {
  const { socket } = sub.to;
  if (socket.readyState !== socket.OPEN) return false;
  const writer = frameWriter(socket);
  if (writer) {
    if (payload.before !== sub.before || payload.after !== sub.after || !payload.frame) {
      payload.frame = textFrame(sub.before, payload.bytes(), sub.after);
      payload.before = sub.before;
      payload.after = sub.after;
    }
    writer.write(payload.frame);
  } else {
    socket.send(sub.before === '' ? payload.text : sub.before + payload.text + sub.after);
  }
  return socket.bufferedAmount > MAX_BUFFERED_BYTES;
}
