import { asc, eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { auditLog, merchants, visitorAttributeDefs } from '../../../src/db/schema.js';
import type { Deps } from '../../../src/deps.js';
import {
  loadMerchantSettings,
  type UpdateMerchantSettingsInput,
  updateMerchantSettings,
} from '../../../src/resolvers/desk/settings.js';
import type { AgentViewer } from '../../../src/resolvers/viewer.js';
import { type Factories, refusalOf, type TestDeps, useTestDeps } from '../../support/deps.js';

let deps: TestDeps;
let f: Factories;
useTestDeps((made) => ({ deps, f } = made));

const GiB4 = 4 * 1024 ** 3;

/** The deps with the configuration cache's announcements recorded (the edge to the other instances). */
function announcing() {
  const announced: string[] = [];
  const spied: Deps = {
    ...deps,
    configCache: {
      ...deps.configCache,
      announceChanged: async (merchantId: string) => {
        announced.push(merchantId);
        return deps.configCache.announceChanged(merchantId);
      },
    },
  };
  return { spied, announced };
}

async function adminOf() {
  const m = await f.merchant();
  return { m, admin: await f.agent(m, { level: 'admin', nickname: 'Ada Admin' }) };
}

const auditRows = (merchantId: string) =>
  deps.db.select().from(auditLog).where(eq(auditLog.merchantId, merchantId)).orderBy(asc(auditLog.id));
const rowOf = async (merchantId: string) =>
  (await deps.db.select().from(merchants).where(eq(merchants.id, merchantId)))[0];

/** The refusal of an update with `input` by `admin` (and that it changed nothing: same version). */
async function refused(admin: AgentViewer, input: unknown) {
  const before = await rowOf(admin.merchantId);
  const refusal = await refusalOf(updateMerchantSettings(deps, admin, input as UpdateMerchantSettingsInput));
  expect((await rowOf(admin.merchantId))?.settingsVersion).toBe(before?.settingsVersion);
  return refusal;
}

describe('Reading the settings (loadMerchantSettings)', () => {
  it('answers a new merchant’s defaults: switches unset, the stored limits, history for all', async () => {
    const { m, admin } = await adminOf();
    expect(await loadMerchantSettings(deps, admin)).toEqual({
      appname: 'Test shop',
      switches: {
        voice: 'unset',
        sound: 'unset',
        uploadFile: 'unset',
        uploadImg: 'unset',
        emoji: 'unset',
        sessionInviteRating: 'unset',
        sessionInviteResolved: 'unset',
      },
      uploadLimits: {
        imageMaxBytes: 20971520,
        fileMaxBytes: 20971520,
        videoMaxBytes: 104857600,
        voiceMaxBytes: 20971520,
      },
      attributes: [],
      idleCloseMinutes: 30,
      maxConcurrentChats: 5,
      historyOnlyMine: false,
      settingsVersion: (await rowOf(m.merchantId))?.settingsVersion,
    });
  });

  it('reads the switches by their stored keys, and historyOnlyMine only when it is exactly true', async () => {
    const m = await f.merchant({
      switches: { upload_img: 'off', session_invite_resolved: 'on' },
      settings: { history_only_mine: 'yes' },
    });
    const admin = await f.agent(m, { level: 'admin' });
    const read = await loadMerchantSettings(deps, admin);
    expect(read.switches).toMatchObject({ uploadImg: 'off', sessionInviteResolved: 'on', voice: 'unset' });
    expect(read.historyOnlyMine).toBe(false);
    await deps.db
      .update(merchants)
      .set({ workbenchSettings: { history_only_mine: true } })
      .where(eq(merchants.id, m.merchantId));
    expect((await loadMerchantSettings(deps, admin)).historyOnlyMine).toBe(true);
  });

  it('is for admins only, and a viewer of no merchant gets NOT_FOUND', async () => {
    const { m, admin } = await adminOf();
    for (const level of ['agent', 'ticket_agent'] as const) {
      const viewer = await f.agent(m, { level });
      expect(await refusalOf(loadMerchantSettings(deps, viewer))).toBe(
        'FORBIDDEN: Only an admin of the merchant may do this',
      );
      expect(await refusalOf(updateMerchantSettings(deps, viewer, { appname: 'Mine' }))).toBe(
        'FORBIDDEN: Only an admin of the merchant may do this',
      );
    }
    expect((await rowOf(m.merchantId))?.appname).toBe('Test shop');
    const ghost = { ...admin, merchantId: 'm_does_not_exist' };
    expect(await refusalOf(loadMerchantSettings(deps, ghost))).toBe('NOT_FOUND: No such merchant');
    expect(await refusalOf(updateMerchantSettings(deps, ghost, { appname: 'Ghost' }))).toBe(
      'NOT_FOUND: No such merchant',
    );
  });
});

describe('Changing the settings (updateMerchantSettings)', () => {
  it('changes what is given, keeps the rest, bumps the version, audits only what changed and announces it', async () => {
    const { m, admin } = await adminOf();
    const { spied, announced } = announcing();
    const before = await loadMerchantSettings(deps, admin);
    const after = await updateMerchantSettings(spied, admin, {
      appname: 'New name',
      switches: { voice: 'off' },
      uploadLimits: { imageMaxBytes: 1024 },
      idleCloseMinutes: 0,
      maxConcurrentChats: 7,
      historyOnlyMine: true,
    });
    const expected = {
      ...before,
      appname: 'New name',
      switches: { ...before.switches, voice: 'off' },
      uploadLimits: { ...before.uploadLimits, imageMaxBytes: 1024 },
      idleCloseMinutes: 0,
      maxConcurrentChats: 7,
      historyOnlyMine: true,
      settingsVersion: before.settingsVersion + 1,
    };
    expect(after).toEqual(expected);
    expect(await loadMerchantSettings(deps, admin)).toEqual(expected);
    expect(announced).toEqual([m.merchantId]);
    const rows = await auditRows(m.merchantId);
    expect(
      rows.map((r) => [r.actorKind, r.actorId, r.actorName, r.action, r.targetType, r.targetId, r.before, r.after]),
    ).toEqual([
      [
        'agent',
        admin.agentId,
        'Ada Admin',
        'settings.updated',
        'merchant',
        m.merchantId,
        {
          appname: 'Test shop',
          switches: before.switches,
          uploadLimits: before.uploadLimits,
          idleCloseMinutes: 30,
          maxConcurrentChats: 5,
          historyOnlyMine: false,
        },
        {
          appname: 'New name',
          switches: expected.switches,
          uploadLimits: expected.uploadLimits,
          idleCloseMinutes: 0,
          maxConcurrentChats: 7,
          historyOnlyMine: true,
        },
      ],
    ]);
  });

  it('an empty change still bumps the version and audits nothing changed', async () => {
    const { m, admin } = await adminOf();
    const before = await loadMerchantSettings(deps, admin);
    const after = await updateMerchantSettings(deps, admin, {});
    expect(after).toEqual({ ...before, settingsVersion: before.settingsVersion + 1 });
    // Same value again: not a change.
    await updateMerchantSettings(deps, admin, { appname: before.appname, switches: {} });
    expect((await auditRows(m.merchantId)).map((r) => [r.before, r.after])).toEqual([
      [{}, {}],
      [{}, {}],
    ]);
    expect((await rowOf(m.merchantId))?.settingsVersion).toBe(before.settingsVersion + 2);
  });

  it('keeps the stored switches it is not given, and `unset` removes one', async () => {
    const m = await f.merchant({ switches: { emoji: 'on', sound: 'off' } });
    const admin = await f.agent(m, { level: 'admin' });
    await updateMerchantSettings(deps, admin, { switches: { voice: 'on', sound: 'unset' } });
    expect((await rowOf(m.merchantId))?.switches).toEqual({ emoji: 'on', voice: 'on' });
  });

  it('takes switches flat as the bootstrap names them, beside the nested ones; they must agree', async () => {
    const { m, admin } = await adminOf();
    await updateMerchantSettings(deps, admin, {
      voice: 'off',
      uploadFile: 'on',
      switches: { uploadFile: 'on', emoji: 'off' },
    });
    expect((await rowOf(m.merchantId))?.switches).toEqual({ voice: 'off', upload_file: 'on', emoji: 'off' });
    expect(await refused(admin, { voice: 'on', switches: { voice: 'off' } })).toBe(
      'BAD_USER_INPUT: voice differs from switches.voice',
    );
    expect(await refused(admin, { switches: { camera: 'on' } })).toMatch(/^BAD_USER_INPUT: switches /);
    expect(await refused(admin, { switches: { voice: 'maybe' } })).toMatch(/^BAD_USER_INPUT: switches\.voice /);
    expect(await refused(admin, { colour: 'red' })).toMatch(/^BAD_USER_INPUT: /);
  });

  it('keeps the workbench settings it does not own when historyOnlyMine changes', async () => {
    const m = await f.merchant({ settings: { some_flag: 3 } });
    const admin = await f.agent(m, { level: 'admin' });
    await updateMerchantSettings(deps, admin, { historyOnlyMine: true });
    expect((await rowOf(m.merchantId))?.workbenchSettings).toEqual({ some_flag: 3, history_only_mine: true });
    await updateMerchantSettings(deps, admin, { historyOnlyMine: false });
    expect((await rowOf(m.merchantId))?.workbenchSettings).toEqual({ some_flag: 3, history_only_mine: false });
  });

  it('accepts the limits’ bounds and refuses one past each', async () => {
    const { m, admin } = await adminOf();
    const ok = await updateMerchantSettings(deps, admin, {
      uploadLimits: { imageMaxBytes: 0, fileMaxBytes: GiB4, videoMaxBytes: GiB4, voiceMaxBytes: 0 },
      idleCloseMinutes: 10_080,
      maxConcurrentChats: 1000,
    });
    expect([ok.uploadLimits, ok.idleCloseMinutes, ok.maxConcurrentChats]).toEqual([
      { imageMaxBytes: 0, fileMaxBytes: GiB4, videoMaxBytes: GiB4, voiceMaxBytes: 0 },
      10_080,
      1000,
    ]);
    expect((await updateMerchantSettings(deps, admin, { maxConcurrentChats: 1 })).maxConcurrentChats).toBe(1);
    const cases: [unknown, string][] = [
      [{ uploadLimits: { fileMaxBytes: GiB4 + 1 } }, 'BAD_USER_INPUT: uploadLimits.fileMaxBytes '],
      [{ uploadLimits: { imageMaxBytes: -1 } }, 'BAD_USER_INPUT: uploadLimits.imageMaxBytes '],
      [{ uploadLimits: { voiceMaxBytes: 1.5 } }, 'BAD_USER_INPUT: uploadLimits.voiceMaxBytes must be a whole number'],
      [{ uploadLimits: { audioMaxBytes: 1 } }, 'BAD_USER_INPUT: uploadLimits '],
      [{ idleCloseMinutes: 10_081 }, 'BAD_USER_INPUT: idleCloseMinutes '],
      [{ idleCloseMinutes: -1 }, 'BAD_USER_INPUT: idleCloseMinutes '],
      [{ maxConcurrentChats: 1001 }, 'BAD_USER_INPUT: maxConcurrentChats '],
      [{ maxConcurrentChats: 0 }, 'BAD_USER_INPUT: maxConcurrentChats '],
      [{ appname: '  ' }, 'BAD_USER_INPUT: appname is required'],
      [{ historyOnlyMine: 'yes' }, 'BAD_USER_INPUT: historyOnlyMine '],
    ];
    for (const [input, start] of cases) expect((await refused(admin, input)).startsWith(start)).toBe(true);
    expect((await loadMerchantSettings(deps, admin)).uploadLimits.fileMaxBytes).toBe(GiB4);
    void m;
  });

  it('replaces the attribute definitions in the given order; image attributes are never editable', async () => {
    const { m, admin } = await adminOf();
    const list = [
      { key: 'zeta', label: 'Zeta', type: 'text' as const, editable: true },
      { key: 'avatar', label: 'Avatar', type: 'image' as const, editable: true },
      { key: 'age', label: 'Age', type: 'number' as const, editable: false },
    ];
    const after = await updateMerchantSettings(deps, admin, { attributes: list });
    expect(after.attributes).toEqual([list[0], { ...list[1], editable: false }, list[2]]);
    const rows = await deps.db
      .select()
      .from(visitorAttributeDefs)
      .where(eq(visitorAttributeDefs.merchantId, m.merchantId))
      .orderBy(asc(visitorAttributeDefs.position));
    expect(rows.map((r) => [r.key, r.position])).toEqual([
      ['zeta', 0],
      ['avatar', 1],
      ['age', 2],
    ]);
    // A shorter list replaces it; the audit row names only the attributes.
    const shorter = await updateMerchantSettings(deps, admin, { attributes: [list[2] as (typeof list)[number]] });
    expect(shorter.attributes).toEqual([list[2]]);
    expect((await auditRows(m.merchantId))[1]?.after).toEqual({ attributes: [list[2]] });
    // An empty list removes them all; absent leaves them.
    await updateMerchantSettings(deps, admin, { attributes: [] });
    expect((await loadMerchantSettings(deps, admin)).attributes).toEqual([]);
    await updateMerchantSettings(deps, admin, { attributes: list });
    await updateMerchantSettings(deps, admin, { appname: 'Still there' });
    expect((await loadMerchantSettings(deps, admin)).attributes.map((a) => a.key)).toEqual(['zeta', 'avatar', 'age']);
  });

  it('refuses malformed attribute lists by field: key, label, type, duplicates, more than 50', async () => {
    const { admin } = await adminOf();
    const a = (key: string) => ({ key, label: key, type: 'text' as const, editable: true });
    const fifty = Array.from({ length: 50 }, (_, i) => a(`k${i}`));
    expect((await updateMerchantSettings(deps, admin, { attributes: fifty })).attributes).toHaveLength(50);
    const cases: [unknown, string][] = [
      [[...fifty, a('k50')], 'BAD_USER_INPUT: attributes '],
      [[a('k1'), a('k1')], 'BAD_USER_INPUT: attributes keys must be unique'],
      [[a('Upper')], 'BAD_USER_INPUT: attributes.0.key must be 1-32 lowercase letters, digits or _'],
      [[a(`k${'x'.repeat(32)}`)], 'BAD_USER_INPUT: attributes.0.key must be 1-32 lowercase letters, digits or _'],
      [[{ ...a('k1'), label: ' ' }], 'BAD_USER_INPUT: attributes.0.label is required'],
      [[{ ...a('k1'), type: 'date' }], 'BAD_USER_INPUT: attributes.0.type '],
    ];
    for (const [attributes, start] of cases) {
      const refusal = await refused(admin, { attributes });
      expect(refusal.startsWith(start), refusal).toBe(true);
    }
    // The 32-character key is still accepted.
    const k32 = `k${'x'.repeat(31)}`;
    expect((await updateMerchantSettings(deps, admin, { attributes: [a(k32)] })).attributes[0]?.key).toBe(k32);
  });

  it('changes only the admin’s own merchant', async () => {
    const { m, admin } = await adminOf();
    const other = await f.merchant();
    const otherAdmin = await f.agent(other, { level: 'admin' });
    const theirs = await loadMerchantSettings(deps, otherAdmin);
    await updateMerchantSettings(deps, admin, {
      appname: 'Only mine',
      attributes: [{ key: 'vip', label: 'VIP', type: 'boolean', editable: true }],
    });
    expect(await loadMerchantSettings(deps, otherAdmin)).toEqual(theirs);
    expect(await auditRows(other.merchantId)).toEqual([]);
    expect((await loadMerchantSettings(deps, admin)).appname).toBe('Only mine');
    void m;
  });
});
