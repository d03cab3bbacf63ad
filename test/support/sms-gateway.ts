import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the webhook SMS driver (`SMS_DRIVER=webhook`) posts for each code it sends. */
export interface SmsMessage {
  mobile: string;
  code: string;
  purpose: string;
}

/**
 * A stand-in SMS gateway on 127.0.0.1 for `SMS_WEBHOOK_URL`: it records every message it is asked
 * to send and answers 200, or 500 for a number `fails` names (the provider's outage).
 */
export async function smsGateway(options: { fails?: (mobile: string) => boolean } = {}) {
  const sent: SmsMessage[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      const message = JSON.parse(body) as SmsMessage;
      sent.push(message);
      res.writeHead(options.fails?.(message.mobile) ? 500 : 200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/sms`,
    sent,
    /** The last code sent to `mobile` (what the phone would show). */
    codeSentTo(mobile: string): string {
      const message = sent.filter((m) => m.mobile === mobile).at(-1);
      if (!message) throw new Error(`no SMS was sent to ${mobile}`);
      return message.code;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
