import { builder } from './builder.js';
import './visitor.js';
import './workbench.js';
import './auth.js';
import './channel.js';
import './conversation.js';
import './message.js';
import './desk/canned.js';
import './desk/labels.js';
import './desk/notes.js';
import './availability.js';
import './desk/admin.js';
import './desk/settings.js';
import './webhooks.js';
import './api-keys.js';
import './bots.js';

/** The whole GraphQL schema; `npm run schema:print` writes it to schema.graphql. */
export const schema = builder.toSchema({ sortSchema: true });
