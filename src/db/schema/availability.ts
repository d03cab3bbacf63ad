// The JSON shapes of availability stored in the merchants' and groups' rows (docs/availability.md).

/**
 * A merchant's routing rule (docs/availability.md "Skills and priority"): when the visitor's
 * attribute equals a value, or the entry page contains a text, a new conversation requires a
 * skill and/or gets a priority.
 */
export interface RoutingRule {
  attribute?: string;
  equals?: string;
  pageContains?: string;
  skill?: string;
  priority?: number;
}

/**
 * A business-hours calendar (src/resolvers/availability/business-hours.ts): local times in
 * minutes of the day, ISO weekdays (1 Monday … 7 Sunday), ISO dates.
 */

export interface BusinessHoursCalendar {
  timezone: string;
  weekly: { day: number; start: number; end: number }[];
  holidays: string[];
  exceptions: { date: string; start: number; end: number }[];
}
