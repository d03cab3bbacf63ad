import {
  loadMerchantSettings,
  type MerchantSettings,
  SWITCHES,
  updateMerchantSettings,
} from '../../resolvers/desk/settings.js';
import { builder } from '../builder.js';
import { UploadLimits } from '../visitor.js';
import { VisitorAttributeDef } from '../workbench.js';
import { withoutNulls } from './admin.js';

/** The merchant's settings in GraphQL (docs/desk.md "Settings"); REST twin: /agent/admin/settings*. */

const SwitchSettingEnum = builder.enumType('SwitchSetting', {
  description: 'A feature switch as admins set it.',
  values: {
    on: { description: 'Enabled.' },
    off: { description: 'Disabled.' },
    unset: { description: 'Not configured: absent from the visitor bootstrap.' },
  } as const,
});

const switchNames = Object.keys(SWITCHES) as (keyof typeof SWITCHES)[];

const SwitchSettings = builder.objectRef<MerchantSettings['switches']>('SwitchSettings').implement({
  description: 'The visitor widget’s switches, by their names in the visitor bootstrap.',
  fields: (t) =>
    Object.fromEntries(
      switchNames.map((name) => [
        name,
        t.field({ type: SwitchSettingEnum, resolve: (s) => s[name], description: `\`${SWITCHES[name]}\` in REST.` }),
      ]),
    ),
});

const MerchantSettingsRef = builder.objectRef<MerchantSettings>('MerchantSettings').implement({
  description: 'What a merchant’s admins configure.',
  fields: (t) => ({
    appname: t.exposeString('appname', { description: 'The merchant’s display name.' }),
    switches: t.field({ type: SwitchSettings, resolve: (s) => s.switches, description: 'Feature switches.' }),
    uploadLimits: t.field({ type: UploadLimits, resolve: (s) => s.uploadLimits, description: 'Upload limits.' }),
    attributes: t.field({
      type: [VisitorAttributeDef],
      resolve: (s) => s.attributes,
      description: 'Visitor attribute definitions, in display order.',
    }),
    idleCloseMinutes: t.exposeInt('idleCloseMinutes', {
      description: 'An open conversation idle this long closes (0: never).',
    }),
    maxConcurrentChats: t.exposeInt('maxConcurrentChats', { description: 'The agents’ default capacity.' }),
    historyOnlyMine: t.exposeBoolean('historyOnlyMine', {
      description: 'Agents (not admins) see only the history of conversations they were assigned.',
    }),
    settingsVersion: t.exposeInt('settingsVersion', { description: 'Bumped by every change.' }),
    // The switches flat too, as the visitor bootstrap (VisitorSetting) names them beside uploadLimits.
    ...Object.fromEntries(
      switchNames.map((name) => [
        name,
        t.field({
          type: SwitchSettingEnum,
          resolve: (s) => s.switches[name],
          description: `The same as \`switches.${name}\` (the visitor bootstrap’s \`${name}\`).`,
        }),
      ]),
    ),
  }),
});

const SwitchSettingsInput = builder.inputType('SwitchSettingsInput', {
  description: 'Switches to change; an absent one stays.',
  fields: (t) =>
    Object.fromEntries(
      switchNames.map((name) => [name, t.field({ type: SwitchSettingEnum, description: `\`${SWITCHES[name]}\`.` })]),
    ),
});

const UploadLimitsInput = builder.inputType('UploadLimitsInput', {
  description: 'Upload limits to change, in bytes (0 to 4 GiB); an absent one stays.',
  fields: (t) => ({
    imageMaxBytes: t.float({ description: 'Images.' }),
    fileMaxBytes: t.float({ description: 'Ordinary files.' }),
    videoMaxBytes: t.float({ description: 'Videos.' }),
    voiceMaxBytes: t.float({ description: 'Voice messages.' }),
  }),
});

const AttributeDefinitionInput = builder.inputType('AttributeDefinitionInput', {
  description: 'A visitor attribute definition.',
  fields: (t) => ({
    key: t.string({ required: true, description: '1-32 lowercase letters, digits or _.' }),
    label: t.string({ required: true, description: 'Display name.' }),
    type: t.string({ required: true, description: '`text`, `number`, `boolean`, `image` or `url`.' }),
    editable: t.boolean({ required: true, description: 'Editable by agents (never for `image`).' }),
  }),
});

const MerchantSettingsInput = builder.inputType('MerchantSettingsInput', {
  description: 'Settings to change; an absent field stays as it is.',
  fields: (t) => ({
    appname: t.string({ description: 'The merchant’s display name.' }),
    switches: t.field({ type: SwitchSettingsInput, description: 'Feature switches.' }),
    uploadLimits: t.field({ type: UploadLimitsInput, description: 'Upload limits.' }),
    attributes: t.field({
      type: [AttributeDefinitionInput],
      description: 'The complete list of visitor attribute definitions, in display order (replaces the current one).',
    }),
    idleCloseMinutes: t.int({ description: '0 to 10080; 0: never.' }),
    maxConcurrentChats: t.int({ description: 'The agents’ default capacity, 1 to 1000.' }),
    historyOnlyMine: t.boolean({ description: 'Agents see only their own conversations’ history.' }),
    ...Object.fromEntries(
      switchNames.map((name) => [
        name,
        t.field({
          type: SwitchSettingEnum,
          description: `The switch \`${name}\` given flat, by its visitor bootstrap name (as \`switches.${name}\`; both given must agree).`,
        }),
      ]),
    ),
  }),
});

builder.queryField('merchantSettings', (t) =>
  t.field({
    type: MerchantSettingsRef,
    description: 'Admins: the merchant’s settings.',
    resolve: async (_root, _args, ctx) => loadMerchantSettings(ctx.deps, await ctx.agent()),
  }),
);

builder.mutationField('updateMerchantSettings', (t) =>
  t.field({
    type: MerchantSettingsRef,
    description:
      'Admins: changes the given settings (audited `settings.updated` with before → after); every instance serves them within a second.',
    args: { input: t.arg({ type: MerchantSettingsInput, required: true, description: 'What to create or change.' }) },
    resolve: async (_root, { input }, ctx) => {
      const given = withoutNulls(input);
      return updateMerchantSettings(ctx.deps, await ctx.agent(), {
        ...given,
        switches: given.switches ? withoutNulls(given.switches) : undefined,
        uploadLimits: given.uploadLimits ? withoutNulls(given.uploadLimits) : undefined,
        attributes: given.attributes as never,
      });
    },
  }),
);
