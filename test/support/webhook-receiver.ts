import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a receiver got, verified with `standardwebhooks` as a merchant's server would. */
export interface Received {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  payload: {
    type: string;
    version: number;
    timestamp: string;
    // biome-ignore lint/suspicious/noExplicitAny: a test reads the payload's fields freely
    data: any;
  };
  /** Whether `Webhook.verify` accepted it with the receiver's secret. */
  verified: boolean;
}

/**
 * A merchant's webhook receiver on 127.0.0.1: records every request and answers with what
 * `respond` says (200 by default); `down()` stops listening, `up()` listens again on the same port.
 */
export async function webhookReceiver() {
  const received: Received[] = [];
  let secrets: string[] = [];
  let respond: (r: Received, res: ServerResponse) => void = (_r, res) => res.writeHead(200).end('ok');
  let server: Server | undefined;
  let port = 0;
  const hanging = new Set<ServerResponse>();

  const verify = (headers: IncomingHttpHeaders, body: string) =>
    secrets.some((s) => {
      try {
        new Webhook(s).verify(body, {
          'webhook-id': String(headers['webhook-id']),
          'webhook-timestamp': String(headers['webhook-timestamp']),
          'webhook-signature': String(headers['webhook-signature']),
        });
        return true;
      } catch {
        return false;
      }
    });

  const up = () =>
    new Promise<void>((resolve) => {
      const listening = createServer((req, res) => {
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (c: string) => {
          body += c;
        });
        req.on('end', () => {
          const r: Received = {
            id: String(req.headers['webhook-id']),
            headers: req.headers,
            body,
            payload: JSON.parse(body),
            verified: verify(req.headers, body),
          };
          received.push(r);
          respond(r, res);
        });
      });
      server = listening;
      listening.listen(port, '127.0.0.1', () => {
        port = (listening.address() as AddressInfo).port;
        resolve();
      });
    });
  const down = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server?.closeAllConnections();
      server?.close(() => resolve());
    });
  await up();

  return {
    received,
    get url() {
      return `http://127.0.0.1:${port}/hooks`;
    },
    /** The secrets `standardwebhooks` verifies with (any one may match). */
    useSecrets(list: string[]) {
      secrets = list;
    },
    answer(fn: (r: Received, res: ServerResponse) => void) {
      respond = fn;
    },
    /** Never answers (until `down`). */
    hang() {
      respond = (_r, res) => {
        hanging.add(res);
      };
    },
    up,
    down,
    /** Delivered events, first receipt of each webhook-id, in arrival order. */
    firsts() {
      const seen = new Set<string>();
      return received.filter((r) => !seen.has(r.id) && seen.add(r.id));
    },
  };
}
