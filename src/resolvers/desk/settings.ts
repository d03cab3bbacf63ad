import { asc, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  type FEATURE_SWITCH_KEYS,
  type FeatureSwitches,
  type Merchant,
  merchants,
  visitorAttributeDefs,
} from '../../db/schema.js';
import type { Deps } from '../../deps.js';
import { DomainError } from '../../errors.js';
import { displayName, parseInput } from '../inputs.js';
import { isEditable } from '../merchant.js';
import { announceMerchantConfigChanged } from '../merchant-config.js';
import type { Tx } from '../outbox/enqueue.js';
import { type AgentViewer, requireAdmin } from '../viewer.js';
import { auditedAgent, recordAudit } from './audit.js';

/**
 * The merchant's settings as its admins change them (docs/desk.md "Settings"): the visitor
 * widget's switches (by the bootstrap's GraphQL names), upload limits, visitor attribute
 * definitions, chat settings, `historyOnlyMine` and the display name. One transaction with its
 * audit row bumps `settings_version`; the change is then announced, so every instance's
 * configuration cache drops its copy (within a second) and the next bootstrap shows it.
 */

/** The switches by their GraphQL bootstrap names, and their stored (legacy) keys. */
export const SWITCHES = {
  voice: 'voice',
  sound: 'sound',
  uploadFile: 'upload_file',
  uploadImg: 'upload_img',
  emoji: 'emoji',
  sessionInviteRating: 'session_invite_rating',
  sessionInviteResolved: 'session_invite_resolved',
} as const satisfies Record<string, (typeof FEATURE_SWITCH_KEYS)[number]>;
export type SwitchName = keyof typeof SWITCHES;
/** `unset`: not configured (absent from the bootstrap; the two invitations then read as off). */
export const SWITCH_VALUES = ['on', 'off', 'unset'] as const;
export type SwitchValue = (typeof SWITCH_VALUES)[number];

export const ATTRIBUTE_TYPES = ['text', 'number', 'boolean', 'image', 'url'] as const;
/** Upload limits: whole bytes, at most 4 GiB (as `merchant:set`). */
const MAX_UPLOAD_LIMIT = 4 * 1024 ** 3;
const bytes = z.number().int('must be a whole number').min(0).max(MAX_UPLOAD_LIMIT);

export interface MerchantSettings {
  appname: string;
  switches: Record<SwitchName, SwitchValue>;
  uploadLimits: { imageMaxBytes: number; fileMaxBytes: number; videoMaxBytes: number; voiceMaxBytes: number };
  attributes: { key: string; label: string; type: string; editable: boolean }[];
  /** Minutes without a message before an open conversation closes (0: never). */
  idleCloseMinutes: number;
  /** The agents' default capacity. */
  maxConcurrentChats: number;
  /** Agents (not admins) see only the history of the conversations they were assigned. */
  historyOnlyMine: boolean;
  settingsVersion: number;
}

const switchValue = z.enum(SWITCH_VALUES).optional();
const switchNames = Object.keys(SWITCHES) as SwitchName[];

export const updateMerchantSettingsInput = z
  .object({
    appname: displayName(64)
      .refine((s) => s.trim().length > 0, 'is required')
      .optional(),
    switches: z
      .object(
        Object.fromEntries(Object.keys(SWITCHES).map((k) => [k, z.enum(SWITCH_VALUES).optional()])) as Record<
          SwitchName,
          z.ZodOptional<z.ZodEnum<['on', 'off', 'unset']>>
        >,
      )
      .strict()
      .optional(),
    uploadLimits: z
      .object({
        imageMaxBytes: bytes.optional(),
        fileMaxBytes: bytes.optional(),
        videoMaxBytes: bytes.optional(),
        voiceMaxBytes: bytes.optional(),
      })
      .strict()
      .optional(),
    /** The complete list, in display order (replaces the current one). */
    attributes: z
      .array(
        z
          .object({
            key: z.string().regex(/^[a-z][a-z0-9_]{0,31}$/, 'must be 1-32 lowercase letters, digits or _'),
            label: displayName(64).refine((s) => s.trim().length > 0, 'is required'),
            type: z.enum(ATTRIBUTE_TYPES),
            editable: z.boolean(),
          })
          .strict(),
      )
      .max(50)
      .refine((list) => new Set(list.map((a) => a.key)).size === list.length, 'keys must be unique')
      .optional(),
    idleCloseMinutes: z.number().int().min(0).max(10_080).optional(),
    maxConcurrentChats: z.number().int().min(1).max(1000).optional(),
    historyOnlyMine: z.boolean().optional(),
    /**
     * The switches may also be given flat, as the visitor bootstrap names them beside
     * `uploadLimits` (`{voice: 'off'}`); the same switch in both places must agree.
     */
    ...(Object.fromEntries(switchNames.map((name) => [name, switchValue])) as Record<SwitchName, typeof switchValue>),
  })
  .strict()
  .superRefine((input, ctx) => {
    for (const name of switchNames) {
      const flat = input[name];
      const nested = input.switches?.[name];
      if (flat !== undefined && nested !== undefined && flat !== nested) {
        ctx.addIssue({ code: 'custom', path: [name], message: `differs from switches.${name}` });
      }
    }
  })
  .transform(({ switches, ...rest }) => {
    const flat = Object.fromEntries(switchNames.flatMap((name) => (rest[name] ? [[name, rest[name]]] : [])));
    for (const name of switchNames) delete rest[name];
    const merged = { ...switches, ...flat };
    return { ...rest, switches: Object.keys(merged).length || switches ? merged : undefined };
  });
export type UpdateMerchantSettingsInput = z.input<typeof updateMerchantSettingsInput>;

async function attributesOf(db: Deps['db'] | Tx, merchantId: string) {
  const rows = await db
    .select()
    .from(visitorAttributeDefs)
    .where(eq(visitorAttributeDefs.merchantId, merchantId))
    .orderBy(asc(visitorAttributeDefs.position), asc(visitorAttributeDefs.key));
  return rows.map((d) => ({ key: d.key, label: d.label, type: d.type, editable: isEditable(d.type, d.editable) }));
}

function settingsOf(m: Merchant, attributes: MerchantSettings['attributes']): MerchantSettings {
  const switches = Object.fromEntries(
    Object.entries(SWITCHES).map(([name, key]) => [name, (m.switches[key] as SwitchValue | undefined) ?? 'unset']),
  ) as MerchantSettings['switches'];
  return {
    appname: m.appname,
    switches,
    uploadLimits: {
      imageMaxBytes: m.imageMaxBytes,
      fileMaxBytes: m.fileMaxBytes,
      videoMaxBytes: m.videoMaxBytes,
      voiceMaxBytes: m.voiceMaxBytes,
    },
    attributes,
    idleCloseMinutes: m.idleCloseMinutes,
    maxConcurrentChats: m.maxConcurrentChats,
    historyOnlyMine: m.workbenchSettings.history_only_mine === true,
    settingsVersion: m.settingsVersion,
  };
}

/** The merchant's settings (admins only). */
export async function loadMerchantSettings(deps: Deps, viewer: AgentViewer): Promise<MerchantSettings> {
  requireAdmin(viewer);
  const [m] = await deps.db.select().from(merchants).where(eq(merchants.id, viewer.merchantId));
  if (!m) throw new DomainError('NOT_FOUND', 'No such merchant');
  return settingsOf(m, await attributesOf(deps.db, m.id));
}

/** Only the members that differ, before and after (the audit row's `before` → `after`). */
function changed(before: MerchantSettings, after: MerchantSettings) {
  const b: Record<string, unknown> = {};
  const a: Record<string, unknown> = {};
  for (const key of Object.keys(after) as (keyof MerchantSettings)[]) {
    if (key === 'settingsVersion') continue;
    if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
      b[key] = before[key];
      a[key] = after[key];
    }
  }
  return { before: b, after: a };
}

/** The row update of `input` over the current row. */
function rowChanges(m: Merchant, input: z.output<typeof updateMerchantSettingsInput>) {
  const set: Partial<typeof merchants.$inferInsert> = {};
  if (input.appname !== undefined) set.appname = input.appname;
  if (input.switches) {
    const switches: FeatureSwitches = { ...m.switches };
    for (const [name, value] of Object.entries(input.switches)) {
      const key = SWITCHES[name as SwitchName];
      if (value === 'unset') delete switches[key];
      else if (value) switches[key] = value;
    }
    set.switches = switches;
  }
  if (input.uploadLimits) Object.assign(set, input.uploadLimits);
  if (input.idleCloseMinutes !== undefined) set.idleCloseMinutes = input.idleCloseMinutes;
  if (input.maxConcurrentChats !== undefined) set.maxConcurrentChats = input.maxConcurrentChats;
  if (input.historyOnlyMine !== undefined) {
    set.workbenchSettings = { ...m.workbenchSettings, history_only_mine: input.historyOnlyMine };
  }
  return set;
}

/** Changes the given settings (absent ones stay), audits before → after, and announces the change. */
export async function updateMerchantSettings(
  deps: Deps,
  viewer: AgentViewer,
  raw: UpdateMerchantSettingsInput,
): Promise<MerchantSettings> {
  requireAdmin(viewer);
  const input = parseInput(updateMerchantSettingsInput, raw);
  const result = await deps.db.transaction(async (tx) => {
    const [m] = await tx.select().from(merchants).where(eq(merchants.id, viewer.merchantId)).for('update');
    if (!m) throw new DomainError('NOT_FOUND', 'No such merchant');
    const before = settingsOf(m, await attributesOf(tx, m.id));
    const [updated] = await tx
      .update(merchants)
      .set({ ...rowChanges(m, input), settingsVersion: sql`${merchants.settingsVersion} + 1` })
      .where(eq(merchants.id, m.id))
      .returning();
    if (input.attributes) {
      await tx.delete(visitorAttributeDefs).where(eq(visitorAttributeDefs.merchantId, m.id));
      if (input.attributes.length)
        await tx
          .insert(visitorAttributeDefs)
          .values(input.attributes.map((a, position) => ({ merchantId: m.id, ...a, position })));
    }
    const after = settingsOf(updated ?? m, await attributesOf(tx, m.id));
    await recordAudit(tx, {
      ...auditedAgent(viewer),
      action: 'settings.updated',
      target: { type: 'merchant', id: m.id },
      ...changed(before, after),
    });
    return after;
  });
  await announceMerchantConfigChanged(deps, viewer.merchantId);
  return result;
}
