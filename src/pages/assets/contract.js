// @ts-check
// Generated from the server’s declarations by `npm run contract:print` (src/pages/contract.ts): do not edit.

/** Envelope `code` of each error (0 is success). */
export const CODES = Object.freeze({
  "UNAUTHENTICATED": -1,
  "VISITOR_UNAUTHENTICATED": 1401,
  "FORBIDDEN": 1403,
  "BAD_USER_INPUT": 1000,
  "CAPTCHA_INVALID": 1001,
  "LOGIN_FAILED": 1002,
  "ACCOUNT_DISABLED": 1003,
  "SESSION_MISMATCH": 1004,
  "RATE_LIMITED": 1429,
  "SMS_DISABLED": 1005,
  "SMS_CODE_INVALID": 1006,
  "SMS_SEND_FAILED": 1007,
  "APPKEY_INVALID": 1008,
  "VISITOR_IDENTITY_INVALID": 1009,
  "REGISTRATION_DISABLED": 1010,
  "MOBILE_ALREADY_REGISTERED": 1011,
  "LAST_ADMIN": 1012,
  "NOT_FOUND": 1404,
  "METHOD_NOT_ALLOWED": 1405,
  "PAYLOAD_TOO_LARGE": 1413,
  "CONVERSATION_CLOSED": 1201,
  "ALREADY_CLAIMED": 1202,
  "NOT_ASSIGNED": 1203,
  "AGENT_UNAVAILABLE": 1204,
  "RATING_NOT_ALLOWED": 1205,
  "HANDED_OFF": 1206,
  "LIMIT_REACHED": 1409,
  "API_KEY_INVALID": 1411,
  "INSUFFICIENT_SCOPE": 1412,
  "SERVICE_UNAVAILABLE": 1503,
  "INTERNAL": 1500
});

/** WebSocket close codes the gateway sends. */
export const CLOSE = Object.freeze({
  "GoingAway": 1001,
  "TryAgainLater": 1013,
  "SessionEnded": 4401,
  "Forbidden": 4403,
  "InitTimeout": 4408,
  "TooMany": 4429
});

/** Event names of the real-time channels. */
export const EVENTS = Object.freeze({
  "agent.login": "agent.login",
  "agent.logout": "agent.logout",
  "agent.state": "agent.state",
  "agent.level_changed": "agent.level_changed",
  "session.ended": "session.ended",
  "visitor.online": "visitor.online",
  "message.created": "message.created",
  "message.read": "message.read",
  "typing": "typing",
  "conversation.queued": "conversation.queued",
  "conversation.queue_position": "conversation.queue_position",
  "conversation.assigned": "conversation.assigned",
  "conversation.transferred": "conversation.transferred",
  "conversation.requeued": "conversation.requeued",
  "conversation.closed": "conversation.closed",
  "conversation.rating_invited": "conversation.rating_invited",
  "note.created": "note.created",
  "conversation.message_left": "conversation.message_left",
  "business_hours.changed": "business_hours.changed",
  "conversation.created": "conversation.created",
  "conversation.handed_off": "conversation.handed_off",
  "conversation.rated": "conversation.rated",
  "visitor.created": "visitor.created",
  "webhook.test": "webhook.test",
  "merchant.config_changed": "merchant.config_changed",
  "visitor_token.revoked": "visitor_token.revoked",
  "subscribed": "subscribed",
  "history.gap": "history.gap"
});

/** Entry pages. */
export const PATHS = Object.freeze({
  "LOGIN": "/agent/login",
  "WORKBENCH": "/agent/",
  "TICKET_ENTRY": "/agent/ticket"
});

/** The merchant settings the admin page edits: switches and their values, upload limits, attribute types. */
export const SETTINGS = Object.freeze({
  "SWITCHES": [
    "voice",
    "sound",
    "upload_file",
    "upload_img",
    "emoji",
    "session_invite_rating",
    "session_invite_resolved"
  ],
  "SWITCH_VALUES": [
    "on",
    "off",
    "unset"
  ],
  "UPLOAD_LIMITS": [
    "image_max_bytes",
    "file_max_bytes",
    "video_max_bytes",
    "voice_max_bytes"
  ],
  "ATTRIBUTE_TYPES": [
    "text",
    "number",
    "boolean",
    "image",
    "url"
  ]
});
