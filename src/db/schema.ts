/**
 * The database schema, by concern in schema/. drizzle-kit (drizzle.config.ts) and the database
 * client read every table through this file: a new file there is re-exported here.
 */

export * from './schema/availability.js';
export * from './schema/chat.js';
export * from './schema/desk.js';
export * from './schema/integration.js';
export * from './schema/merchants.js';
export * from './schema/outbox.js';
export * from './schema/visitors.js';
