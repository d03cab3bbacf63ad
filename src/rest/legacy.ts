import type { VisitorBootstrap } from '../resolvers/visitor.js';
import type { Workbench } from '../resolvers/workbench.js';

/**
 * The one place where domain results take the legacy snake_case shapes of the spec. A switch
 * the merchant has not configured stays `undefined`, so JSON leaves it out (absent, not null).
 */
export function legacyVisitorBootstrap({ visitor, setting: s }: VisitorBootstrap) {
  return {
    visitor: {
      nickname: visitor.nickname,
      avatar: visitor.avatar,
      uid: visitor.uid,
      lang: visitor.lang,
      channel: visitor.channel,
      attributes: visitor.attributes.map((a) => ({
        key: a.key,
        label: a.label,
        type: a.type,
        value: a.value,
        editable: a.editable,
      })),
    },
    setting: {
      appname: s.appname,
      appkey: s.appkey,
      ws_address: s.wsAddress,
      upload_limits: {
        image_max_bytes: s.uploadLimits.imageMaxBytes,
        file_max_bytes: s.uploadLimits.fileMaxBytes,
        video_max_bytes: s.uploadLimits.videoMaxBytes,
        voice_max_bytes: s.uploadLimits.voiceMaxBytes,
      },
      voice: s.voice,
      sound: s.sound,
      upload_file: s.uploadFile,
      upload_img: s.uploadImg,
      emoji: s.emoji,
      session_invite_rating: s.sessionInviteRating,
      session_invite_resolved: s.sessionInviteResolved,
      verified: s.verified,
      paid: s.paid,
    },
  };
}

export function legacyWorkbench(w: Workbench) {
  return {
    chatting: Object.fromEntries(
      w.chatting.map((c) => [
        c.key,
        {
          id: c.id,
          name: c.name,
          type: c.type,
          timestamp: c.timestamp,
          pinned_at: c.pinnedAt,
          unread_count: c.unreadCount,
          bot: c.bot,
          account_state: c.accountState,
          history_only_mine: c.historyOnlyMine,
          items: c.items,
        },
      ]),
    ),
    agent: {
      agent_id: w.agent.agentId,
      nickname: w.agent.nickname,
      avatar: w.agent.avatar,
      level: w.agent.level,
      state: w.agent.state,
    },
    agent_groups: w.agentGroups.map((g) => ({ id: g.id, name: g.name, is_default: g.isDefault })),
    // The merchant's free-form settings first, so they can never override the fixed members.
    setting: {
      ...w.setting.extra,
      bid: w.setting.bid,
      appname: w.setting.appname,
      appkey: w.setting.appkey,
      ws_address: w.setting.wsAddress,
    },
    visitor_attribute_config: {
      attributes: w.visitorAttributeConfig.attributes.map((a) => ({
        key: a.key,
        label: a.label,
        type: a.type,
        editable: a.editable,
      })),
    },
    extensions: {
      nav: w.extensions.nav,
      chat_actions: w.extensions.chat_actions,
      side_iframes: w.extensions.side_iframes,
      flags: w.extensions.flags,
      account_level_options: w.extensions.account_level_options,
    },
  };
}
