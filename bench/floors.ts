import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { type WebSocket, WebSocketServer } from 'ws';
import { renderCaptcha } from '../src/auth/captcha-image.js';
import { verifyPassword } from '../src/auth/passwords.js';
import { businessHoursAt } from '../src/resolvers/availability/business-hours.js';
import { redisEventBus } from '../src/stores/bus-redis.js';

/**
 * The floors of the benchmarks: a raw `node:http` server doing the same work as each gateway
 * endpoint with nothing in between — the same token check, the same Redis session read, the
 * same prepared postgres.js reads, the same publication — so the ratio measures the gateway's
 * own overhead (express, sessions, validation, the domain layer, GraphQL).
 */

const env = process.env;
const sql = postgres(env.DATABASE_URL as string, { max: 10, prepare: true, onnotice: () => {} });
const prefix = env.REDIS_PREFIX ?? 'parley:';
const redis = new Redis(env.REDIS_URL as string, { keyPrefix: prefix });
const subscriber = new Redis(env.REDIS_URL as string);
const bus = redisEventBus({ redis, subscriber, prefix, historySize: 1000 });
const sessionTtl = Number(env.SESSION_TTL_SECONDS ?? 28800);
const wsAddress = `ws://127.0.0.1:${env.PORT}/graphql`;

const sendJson = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
};
const switchOf = (v: unknown) => (v === 'on' || v === 'off' ? v : undefined);

async function visitorBootstrap(req: IncomingMessage) {
  const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  if (!token) return null;
  const hash = createHash('sha256').update(token).digest('hex');
  const [viewer] = await sql`
    select v.id, v.merchant_id, m.bid, v.channel from visitor_tokens t
    join visitors v on v.id = t.visitor_id join merchants m on m.id = v.merchant_id
    where t.token_hash = ${hash} and t.merchant_id = v.merchant_id and t.revoked_at is null and t.expires_at > now()
    limit 1`;
  if (!viewer) return null;
  const [[row], attributes] = await Promise.all([
    sql`select v.*, m.appname, m.appkey, m.bid, m.switches, m.verified, m.paid, m.image_max_bytes, m.file_max_bytes,
          m.video_max_bytes, m.voice_max_bytes, m.business_hours, m.contact_fields
        from visitors v join merchants m on m.id = v.merchant_id
        where v.id = ${viewer.id} and v.merchant_id = ${viewer.merchant_id} limit 1`,
    sql`select d.key, d.label, d.type, d.editable, a.value from visitor_attributes a
        join visitor_attribute_defs d on d.key = a.key and d.merchant_id = ${viewer.merchant_id}
        where a.visitor_id = ${viewer.id} order by d.position, d.key`,
  ]);
  if (!row) return null;
  void bus.publish(`global-${row.bid}`, 'visitor.online', { uid: row.id, nickname: row.nickname }).catch(() => {});
  const s = row.switches as Record<string, string>;
  // Evaluated at each ask, as the gateway does (docs/availability.md): never a cached flag.
  const hours = businessHoursAt(row.business_hours, Date.now());
  return {
    visitor: {
      nickname: row.nickname,
      avatar: row.avatar,
      uid: row.id,
      lang: row.lang,
      channel: row.channel,
      attributes: attributes.map((a) => ({
        key: a.key,
        label: a.label,
        type: a.type,
        value: a.value,
        editable: a.editable && a.type !== 'image',
      })),
    },
    setting: {
      appname: row.appname,
      appkey: row.appkey,
      ws_address: wsAddress,
      upload_limits: {
        image_max_bytes: Number(row.image_max_bytes),
        file_max_bytes: Number(row.file_max_bytes),
        video_max_bytes: Number(row.video_max_bytes),
        voice_max_bytes: Number(row.voice_max_bytes),
      },
      voice: switchOf(s.voice),
      sound: switchOf(s.sound),
      upload_file: switchOf(s.upload_file),
      upload_img: switchOf(s.upload_img),
      emoji: switchOf(s.emoji),
      session_invite_rating: switchOf(s.session_invite_rating) ?? 'off',
      session_invite_resolved: switchOf(s.session_invite_resolved) ?? 'off',
      verified: row.verified,
      paid: Number(row.paid),
      contact_fields: row.contact_fields,
      business_hours: { open: hours.open, next_open_at: hours.nextOpenAt, timezone: hours.timezone },
    },
  };
}

async function agentWorkbench(req: IncomingMessage) {
  const sid = req.headers.token;
  if (typeof sid !== 'string') return null;
  const raw = await redis.getex(`sess:${sid}`, 'EX', sessionTtl);
  const agentId = raw ? (JSON.parse(raw) as { agent?: { agentId: string } }).agent?.agentId : undefined;
  if (!agentId) return null;
  const [agent] = await sql`select * from agents where id = ${agentId} limit 1`;
  if (!agent || agent.disabled) return null;
  const m = agent.merchant_id;
  const [[merchant], groups, chats, defs, state] = await Promise.all([
    sql`select * from merchants where id = ${m} limit 1`,
    sql`select * from agent_groups where merchant_id = ${m} order by is_default desc, position, name`,
    sql`select c.*, v.nickname,
          (select count(*)::int from messages um where um.conversation_id = c.id and um.seq > c.agent_read_seq
             and um.sender_type = 'visitor') as unread
        from conversations c join visitors v on v.id = c.visitor_id and v.merchant_id = ${m}
        where c.agent_id = ${agentId} and c.merchant_id = ${m} and c.state = 'active'
        order by c.pinned_at desc, c.timestamp desc`,
    sql`select * from visitor_attribute_defs where merchant_id = ${m} order by position, key`,
    redis.get(`presence:state:${agentId}`),
  ]);
  if (!merchant) return null;
  return {
    chatting: Object.fromEntries(
      chats.map((c) => [
        `visitor${c.visitor_id}`,
        {
          id: c.visitor_id,
          name: c.nickname,
          type: 'visitor',
          timestamp: Number(c.timestamp),
          pinned_at: Number(c.pinned_at),
          unread_count: c.unread,
          bot: c.bot,
          account_state: c.account_state,
          history_only_mine: agent.level !== 'admin' && merchant.workbench_settings?.history_only_mine === true,
          items: c.items,
        },
      ]),
    ),
    agent: {
      agent_id: agent.id,
      nickname: agent.nickname,
      avatar: agent.avatar,
      level: agent.level,
      state: state ?? 'offline',
    },
    agent_groups: groups.map((g) => ({ id: g.id, name: g.name, is_default: g.is_default })),
    setting: {
      ...merchant.workbench_settings,
      bid: merchant.bid,
      appname: merchant.appname,
      appkey: merchant.appkey,
      ws_address: wsAddress,
    },
    visitor_attribute_config: {
      attributes: defs.map((d) => ({
        key: d.key,
        label: d.label,
        type: d.type,
        editable: d.editable && d.type !== 'image',
      })),
    },
    extensions: merchant.extensions,
  };
}

const [alice] = await sql`select password_hash from agents where username = 'alice'`;
let rawBody = '';

/**
 * The message path's floor: the visitor's token check, then in one transaction the conversation
 * row locked and its next seq taken, the message inserted; after the commit `message.created`
 * published on the agent's and the visitor's channels through the same Redis bus, and delivered
 * by a raw ws server (below) to the sockets of that channel. Nothing in between.
 */
async function sendMessageFloor(req: IncomingMessage) {
  const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
  let body = '';
  for await (const chunk of req) body += chunk;
  const input = JSON.parse(body) as { client_msg_id: string; content: string };
  if (!token) return null;
  const hash = createHash('sha256').update(token).digest('hex');
  const [viewer] = await sql`
    select v.id, v.merchant_id, v.channel from visitor_tokens t join visitors v on v.id = t.visitor_id
    where t.token_hash = ${hash} and t.merchant_id = v.merchant_id and t.revoked_at is null and t.expires_at > now() limit 1`;
  if (!viewer) return null;
  const message = await sql.begin(async (tx) => {
    const [c] = await tx`
      update conversations set last_seq = last_seq + 1
      where merchant_id = ${viewer.merchant_id} and visitor_id = ${viewer.id} and state = 'active'
      returning id, agent_id, last_seq`;
    if (!c) throw new Error('no active conversation');
    const id = `msg_${createHash('sha1').update(`${c.id}:${c.last_seq}:${Math.random()}`).digest('hex').slice(0, 20)}`;
    const [m] = await tx`
      insert into messages (id, conversation_id, merchant_id, visitor_id, seq, sender_type, sender_id, client_msg_id, type, content)
      values (${id}, ${c.id}, ${viewer.merchant_id}, ${viewer.id}, ${c.last_seq}, 'visitor', ${viewer.id}, ${input.client_msg_id}, 'text', ${input.content})
      returning id, seq, created_at`;
    const row = m as { id: string; seq: number; created_at: Date };
    return {
      id: row.id,
      seq: row.seq,
      created_at: row.created_at,
      conversation_id: c.id as string,
      agent_id: c.agent_id as string,
    };
  });
  const wire = {
    message: {
      id: message.id,
      conversation_id: message.conversation_id,
      visitor_id: viewer.id,
      seq: message.seq,
      sender_type: 'visitor',
      sender_id: viewer.id,
      client_msg_id: input.client_msg_id,
      type: 'text',
      content: input.content,
      attachment: null,
      meta: null,
      created_at: new Date(message.created_at).getTime(),
      recalled: false,
    },
  };
  await Promise.all([
    bus.publish(`agent-${message.agent_id}`, 'message.created', wire),
    bus.publish(viewer.channel, 'message.created', wire),
  ]);
  return wire.message;
}

/** Raw ws delivery for the message floor: `/floor/ws?channel=…`, one bus subscription per channel. */
const floorWss = new WebSocketServer({ noServer: true });
const floorChannels = new Map<string, Set<WebSocket>>();
function joinFloorChannel(channel: string, ws: WebSocket) {
  let sockets = floorChannels.get(channel);
  if (!sockets) {
    const created = new Set<WebSocket>();
    sockets = created;
    floorChannels.set(channel, created);
    void (async () => {
      for await (const event of bus.subscribe(channel)) {
        const frame = JSON.stringify(event);
        for (const socket of created) socket.send(frame);
      }
    })();
  }
  sockets.add(ws);
  ws.on('close', () => sockets.delete(ws));
}

const server = createServer(async (req, res) => {
  try {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') return sendJson(res, 200, { status: 'ok' });
    if (path === '/visitor/data/get') {
      const data = await visitorBootstrap(req);
      return sendJson(res, 200, data ? { code: 0, msg: 'ok', data } : { code: 1401, msg: 'no', data: [] });
    }
    if (path === '/agent/data/get') {
      const data = await agentWorkbench(req);
      return sendJson(res, 200, data ? { code: 0, msg: 'ok', data } : { code: -1, msg: '请先登录', data: [] });
    }
    if (path === '/raw') {
      // The same JSON from memory: the ceiling of node:http on this machine.
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(rawBody),
      });
      return res.end(rawBody);
    }
    if (path === '/raw/set' && req.method === 'POST') {
      rawBody = '';
      for await (const chunk of req) rawBody += chunk;
      return sendJson(res, 200, { ok: true });
    }
    if (path === '/login') {
      const ok = await verifyPassword(alice?.password_hash, 'alice-password');
      return sendJson(res, 200, { code: ok ? 0 : 1002, msg: 'ok', data: [] });
    }
    if (path === '/captcha') {
      // The same text as the gateway's (CAPTCHA_TEST_ANSWER): the same glyphs to draw.
      const { jpeg } = await renderCaptcha(env.CAPTCHA_TEST_ANSWER);
      res.writeHead(200, { 'content-type': 'image/jpeg', 'cache-control': 'no-store' });
      return res.end(jpeg);
    }
    if (path === '/floor/message' && req.method === 'POST') {
      const data = await sendMessageFloor(req);
      return sendJson(res, 200, data ? { code: 0, msg: 'ok', data } : { code: 1401, msg: 'no', data: [] });
    }
    sendJson(res, 404, { code: 1404, msg: 'not found', data: [] });
  } catch (error) {
    sendJson(res, 500, { code: 1500, msg: (error as Error).message, data: [] });
  }
});
server.keepAliveTimeout = 5000;
server.on('upgrade', (req, socket, head) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const channel = url.searchParams.get('channel');
  if (url.pathname !== '/floor/ws' || !channel) return socket.destroy();
  floorWss.handleUpgrade(req, socket, head, (ws) => joinFloorChannel(channel, ws));
});
server.listen(Number(env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  void sql.end().then(() => process.exit(0));
  redis.disconnect();
  subscriber.disconnect();
});
