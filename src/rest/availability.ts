import { z } from 'zod';
import {
  type BusinessHoursSettings,
  loadBusinessHours,
  updateBusinessHours,
} from '../resolvers/availability/calendars.js';
import { type AnyRoute, jsonRoute } from './route.js';

/** Business hours, messages left and routing (docs/availability.md): the legacy twins of the GraphQL operations. */

const hhmm = z.string().openapi({ description: 'Local time HH:MM.' });
const interval = z.object({ day: z.union([z.number().int(), z.string()]), start: hhmm, end: hhmm }).strict();
const exception = z.object({ date: z.string(), start: hhmm, end: hhmm }).strict();

const businessHoursData = z
  .object({
    group_id: z.string().nullable(),
    configured: z.boolean(),
    timezone: z.string(),
    weekly: z.array(interval),
    holidays: z.array(z.string()),
    exceptions: z.array(exception),
    state: z.object({ open: z.boolean(), next_open_at: z.number().int().nullable(), timezone: z.string() }).strict(),
  })
  .strict();

const legacyBusinessHours = (s: BusinessHoursSettings): z.input<typeof businessHoursData> => ({
  group_id: s.groupId,
  configured: s.configured,
  timezone: s.timezone,
  weekly: s.weekly,
  holidays: s.holidays,
  exceptions: s.exceptions,
  state: { open: s.state.open, next_open_at: s.state.nextOpenAt, timezone: s.state.timezone },
});

const example: z.input<typeof businessHoursData> = {
  group_id: null,
  configured: true,
  timezone: 'Europe/Paris',
  weekly: [{ day: 1, start: '09:00', end: '18:00' }],
  holidays: ['2026-12-25'],
  exceptions: [],
  state: { open: false, next_open_at: 1795507200, timezone: 'Europe/Paris' },
};

const groupInput = z.object({ group_id: z.string().max(64).optional() }).transform((i) => ({ groupId: i.group_id }));
const updateInput = z
  .object({
    group_id: z.string().max(64).nullish(),
    timezone: z.string().max(64),
    weekly: z.array(interval).max(100),
    holidays: z.array(z.string()).max(400).optional(),
    exceptions: z.array(exception).max(400).optional(),
  })
  .transform((i) => ({
    groupId: i.group_id ?? null,
    timezone: i.timezone,
    weekly: i.weekly,
    holidays: i.holidays ?? [],
    exceptions: i.exceptions ?? [],
  }));

export const availabilityEndpoints: AnyRoute[] = [
  jsonRoute({
    method: 'get',
    path: '/agent/business-hours/get',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Business hours',
    description: 'The calendar of the merchant, or of a group (group_id), and whether it is open now.',
    input: groupInput,
    requestExample: {},
    output: businessHoursData,
    example,
    handle: async ({ deps, viewer, input }) => legacyBusinessHours(await loadBusinessHours(deps, viewer, input)),
  }),
  jsonRoute({
    method: 'post',
    path: '/agent/business-hours/update',
    identity: 'agent',
    tag: 'Availability',
    summary: 'Set business hours (admins)',
    description:
      'Replaces the calendar of the merchant, or of a group (group_id): IANA timezone, weekly intervals {day, start, end} (HH:MM, overnight when end < start), holidays (ISO dates), exceptions {date, start, end}. Non-admins 1403. Audited.',
    input: updateInput,
    encodings: ['json'],
    requestExample: { timezone: 'Europe/Paris', weekly: [{ day: 1, start: '09:00', end: '18:00' }], holidays: [] },
    output: businessHoursData,
    example,
    handle: async ({ deps, viewer, input }) => legacyBusinessHours(await updateBusinessHours(deps, viewer, input)),
  }),
];
