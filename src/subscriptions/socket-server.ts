import { WebSocketServer } from 'ws';
import type { Config } from '../config.js';
import { type OriginPolicy, verifyWebSocketOrigin } from '../http/origins.js';
import { MAX_WS_PAYLOAD_BYTES } from './limits.js';

/**
 * The `ws` server of a real-time transport, the same for both: upgrades handed over by the HTTP
 * server (no port of its own), frames capped at MAX_WS_PAYLOAD_BYTES, no compression, and a
 * foreign browser Origin refused with 403 before the socket opens.
 */
export function socketServer(config: Pick<Config, keyof OriginPolicy>): WebSocketServer {
  return new WebSocketServer({
    noServer: true,
    maxPayload: MAX_WS_PAYLOAD_BYTES,
    perMessageDeflate: false,
    verifyClient: verifyWebSocketOrigin(config),
  });
}
