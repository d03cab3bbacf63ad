import { eq } from 'drizzle-orm';
import { hashPassword } from '../auth/passwords.js';
import type { Deps } from '../deps.js';
import { newSecret } from '../ids.js';
import {
  agentGroups,
  agents,
  merchants,
  visitorAttributeDefs,
  visitorAttributes,
  visitors,
  type WorkbenchExtensions,
} from './schema.js';

// The demo data as tables (the README's "Demo data" lists them), then one writer per table.

/** Every feature switch on. */
const allOn = {
  voice: 'on',
  sound: 'on',
  upload_file: 'on',
  upload_img: 'on',
  emoji: 'on',
  session_invite_rating: 'on',
  session_invite_resolved: 'on',
};

const extensions: WorkbenchExtensions = {
  nav: [{ key: 'chat', label: 'Chat', path: '/agent/' }],
  chat_actions: [{ key: 'transfer', label: 'Transfer' }],
  side_iframes: [],
  flags: { translation: true },
  account_level_options: { agent: 'Agent', admin: 'Administrator', ticket_agent: 'Ticket agent' },
};

const demoMerchants = [
  { id: 'm_demo', bid: 'demo', appname: 'Demo Shop', appkey: 'demo-appkey', verified: true },
  { id: 'm_acme', bid: 'acme', appname: 'Acme Support', appkey: 'acme-appkey', verified: false },
];

const demoGroups = [
  { id: 'g_demo_default', merchantId: 'm_demo', name: 'Default', isDefault: true, position: 0 },
  { id: 'g_demo_sales', merchantId: 'm_demo', name: 'Sales', isDefault: false, position: 1 },
  { id: 'g_acme_default', merchantId: 'm_acme', name: 'Default', isDefault: true, position: 0 },
];

/** Each logs in with `{username}-password`. */
const demoAgents = [
  {
    id: 'a_alice',
    merchantId: 'm_demo',
    groupId: 'g_demo_default',
    username: 'alice',
    nickname: 'Alice',
    level: 'agent',
    disabled: false,
  },
  {
    id: 'a_tom',
    merchantId: 'm_demo',
    groupId: 'g_demo_default',
    username: 'tom',
    nickname: 'Tom',
    level: 'ticket_agent',
    disabled: false,
  },
  {
    id: 'a_dave',
    merchantId: 'm_demo',
    groupId: 'g_demo_sales',
    username: 'dave',
    nickname: 'Dave',
    level: 'agent',
    disabled: true,
  },
  {
    id: 'a_ada',
    merchantId: 'm_demo',
    groupId: 'g_demo_default',
    username: 'ada',
    nickname: 'Ada',
    level: 'admin',
    disabled: false,
  },
  {
    id: 'a_bob',
    merchantId: 'm_acme',
    groupId: 'g_acme_default',
    username: 'bob',
    nickname: 'Bob',
    level: 'agent',
    disabled: false,
  },
];

const demoAttributeDefs = [
  { key: 'email', label: 'Email', type: 'text', editable: true, position: 0 },
  { key: 'member_card', label: 'Member card', type: 'image', editable: true, position: 1 },
  { key: 'orders', label: 'Orders', type: 'number', editable: false, position: 2 },
];

const demoVisitors = [
  {
    id: 'v_demo_lily',
    nickname: 'Lily',
    lang: 'en',
    email: 'lily@example.com',
    orders: 3,
  },
  {
    id: 'v_demo_wang',
    nickname: '王先生',
    lang: 'zh-CN',
    email: 'wang@example.cn',
    orders: 1,
  },
];

/**
 * The fixed demo data of the README: merchants `demo` and `acme`, agents alice, tom (ticket
 * agent), dave (disabled), ada (admin) and bob, and two demo visitors (their conversations with alice are
 * made by the chat domain: src/resolvers/demo.ts). Idempotent: rows are keyed by fixed ids and
 * upserted. Never run in production.
 */
export async function seedDemoData(deps: Pick<Deps, 'db' | 'now' | 'config'>) {
  if (deps.config.env === 'production') throw new Error('demo data is never loaded in production');
  const { db } = deps;
  await seedMerchants(db);
  for (const g of demoGroups) await db.insert(agentGroups).values(g).onConflictDoNothing();
  await seedAgents(db);
  for (const d of demoAttributeDefs) {
    await db
      .insert(visitorAttributeDefs)
      .values({ merchantId: 'm_demo', ...d })
      .onConflictDoNothing();
  }
  await seedVisitors(db);
}

/** Upserted: a re-seed restores the demo names, keys, switches and extensions (never the identity secret). */
async function seedMerchants(db: Deps['db']) {
  for (const m of demoMerchants) {
    await db
      .insert(merchants)
      .values({ ...m, identitySecret: `${m.bid}-identity-secret-${newSecret(8)}`, switches: allOn, extensions })
      .onConflictDoUpdate({
        target: merchants.id,
        set: { bid: m.bid, appname: m.appname, appkey: m.appkey, switches: allOn, extensions },
      });
  }
}

async function seedAgents(db: Deps['db']) {
  for (const p of demoAgents) {
    const [existing] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, p.id)).limit(1);
    if (existing) continue; // keep a password an operator may have reset
    await db
      .insert(agents)
      .values({
        ...p,
        avatar: `/assets/avatar-${p.username}.svg`,
        passwordHash: await hashPassword(`${p.username}-password`),
      })
      .onConflictDoNothing();
  }
}

/** The two demo visitors and their attributes (a fresh channel each; an existing visitor is kept). */
async function seedVisitors(db: Deps['db']) {
  for (const v of demoVisitors) {
    await db
      .insert(visitors)
      .values({
        id: v.id,
        merchantId: 'm_demo',
        nickname: v.nickname,
        lang: v.lang,
        channel: `visitor-${newSecret(24)}`,
      })
      .onConflictDoNothing();
    for (const [key, value] of [
      ['email', v.email],
      ['member_card', `/assets/member-card-${v.nickname === 'Lily' ? 'gold' : 'silver'}.svg`],
      ['orders', v.orders],
    ] as const) {
      await db.insert(visitorAttributes).values({ visitorId: v.id, key, value }).onConflictDoNothing();
    }
  }
}

/** The merchants the demo data writes: their cached configuration must be dropped after a seed. */
export const demoMerchantIds = ['m_demo', 'm_acme'] as const;
