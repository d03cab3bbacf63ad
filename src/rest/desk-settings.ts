import { z } from 'zod';
import {
  loadMerchantSettings,
  type MerchantSettings,
  SWITCH_VALUES,
  SWITCHES,
  type SwitchName,
  updateMerchantSettings,
} from '../resolvers/desk/settings.js';
import { type AnyRoute, jsonRoute } from './route.js';
import { legacyUploadLimits, uploadLimitsData } from './upload-limits.js';

/** The merchant's settings over REST (docs/desk.md "Settings"): switches by their legacy bootstrap keys. */

const switchKeys = Object.entries(SWITCHES) as [SwitchName, (typeof SWITCHES)[SwitchName]][];

const settingsData = z
  .object({
    appname: z.string(),
    switches: z.record(z.string(), z.enum(SWITCH_VALUES)).openapi({
      description: 'voice, sound, upload_file, upload_img, emoji, session_invite_rating, session_invite_resolved.',
    }),
    upload_limits: uploadLimitsData,
    attributes: z.array(
      z.object({ key: z.string(), label: z.string(), type: z.string(), editable: z.boolean() }).strict(),
    ),
    idle_close_minutes: z.number().int(),
    max_concurrent_chats: z.number().int(),
    history_only_mine: z.boolean(),
    settings_version: z.number().int(),
    // The switches flat too, by the visitor bootstrap's keys (setting.voice, setting.upload_img…).
    ...Object.fromEntries(switchKeys.map(([, key]) => [key, z.enum(SWITCH_VALUES)])),
  })
  .strict();

const legacySettings = (s: MerchantSettings): z.input<typeof settingsData> => ({
  appname: s.appname,
  switches: Object.fromEntries(switchKeys.map(([name, key]) => [key, s.switches[name]])),
  upload_limits: legacyUploadLimits(s.uploadLimits),
  attributes: s.attributes,
  idle_close_minutes: s.idleCloseMinutes,
  max_concurrent_chats: s.maxConcurrentChats,
  history_only_mine: s.historyOnlyMine,
  settings_version: s.settingsVersion,
  ...Object.fromEntries(switchKeys.map(([name, key]) => [key, s.switches[name]])),
});

const updateBody = z
  .object({
    appname: z.string().optional(),
    switches: z
      .object(Object.fromEntries(switchKeys.map(([, key]) => [key, z.enum(SWITCH_VALUES).optional()])))
      .strict()
      .optional(),
    upload_limits: z
      .object({
        image_max_bytes: z.number().optional(),
        file_max_bytes: z.number().optional(),
        video_max_bytes: z.number().optional(),
        voice_max_bytes: z.number().optional(),
      })
      .strict()
      .optional(),
    attributes: z
      .array(z.object({ key: z.string(), label: z.string(), type: z.string(), editable: z.boolean() }))
      .optional()
      .openapi({ description: 'The complete list, in display order (replaces it).' }),
    idle_close_minutes: z.number().int().optional(),
    max_concurrent_chats: z.number().int().optional(),
    history_only_mine: z.boolean().optional(),
    // A switch may be given flat, by its bootstrap key (`voice`, `upload_img`…), as in setting of /visitor/data/get.
    ...(Object.fromEntries(switchKeys.map(([, key]) => [key, z.enum(SWITCH_VALUES).optional()])) as Record<
      (typeof SWITCHES)[SwitchName],
      z.ZodOptional<z.ZodEnum<['on', 'off', 'unset']>>
    >),
  })
  .strict()
  .transform((i) => ({
    ...Object.fromEntries(switchKeys.map(([name, key]) => [name, i[key]]).filter(([, v]) => v)),
    appname: i.appname,
    switches: i.switches
      ? Object.fromEntries(switchKeys.map(([name, key]) => [name, i.switches?.[key]]).filter(([, v]) => v))
      : undefined,
    uploadLimits: i.upload_limits && {
      imageMaxBytes: i.upload_limits.image_max_bytes,
      fileMaxBytes: i.upload_limits.file_max_bytes,
      videoMaxBytes: i.upload_limits.video_max_bytes,
      voiceMaxBytes: i.upload_limits.voice_max_bytes,
    },
    attributes: i.attributes as never,
    idleCloseMinutes: i.idle_close_minutes,
    maxConcurrentChats: i.max_concurrent_chats,
    historyOnlyMine: i.history_only_mine,
  }));

export const deskSettingsEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'get',
    path: '/agent/admin/settings',
    identity: 'agent',
    tag: 'Agent admin',
    summary: 'The merchant’s settings',
    description: 'Admins only: another level gets 1403 (HTTP 403).',
    output: settingsData,
    handle: async ({ deps, viewer }) => legacySettings(await loadMerchantSettings(deps, viewer)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/admin/settings/update',
    identity: 'agent',
    tag: 'Agent admin',
    summary: 'Change the merchant’s settings',
    description:
      'Admins only (1403). Absent fields stay; switches `on`, `off` or `unset`; upload limits 0 to 4 GiB. Audited `settings.updated` (before → after); every instance serves the change within a second.',
    encodings: ['json'],
    input: updateBody,
    requestExample: { switches: { voice: 'off' }, upload_limits: { image_max_bytes: 1048576 } },
    output: settingsData,
    handle: async ({ deps, viewer, input }) => legacySettings(await updateMerchantSettings(deps, viewer, input)),
  }),
];
