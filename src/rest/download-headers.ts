import type { Response } from 'express';
import type { attachments } from '../db/schema.js';
import type { AttachmentVariant } from '../resolvers/attachments/download.js';
import { rendersInline } from '../resolvers/attachments/download.js';

/** What a download answers besides its bytes: the byte range asked, and the safe headers. */

type AttachmentRow = typeof attachments.$inferSelect;

/** The download's headers: its type, the safe-serving ones, its disposition and its length or range. */
export function writeHeaders(
  res: Response,
  row: AttachmentRow,
  variant: AttachmentVariant,
  size: number | undefined,
  range: { start: number; end: number } | undefined,
) {
  res.setHeader('Content-Type', variant === 'file' ? row.mime : 'image/webp');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  // Whatever it is, it never runs as a page of our origin (an HTML or SVG file opened directly).
  res.setHeader('Content-Security-Policy', "default-src 'none'; sandbox");
  res.setHeader('Cache-Control', 'private, max-age=300');
  const inline = variant === 'thumbnail' || rendersInline(row);
  res.setHeader('Content-Disposition', `${inline ? 'inline' : 'attachment'}; ${dispositionName(row.name)}`);
  if (size !== undefined) res.setHeader('Accept-Ranges', 'bytes');
  if (range && size !== undefined) {
    res.status(206);
    res.setHeader('Content-Range', `bytes ${range.start}-${range.end}/${size}`);
    res.setHeader('Content-Length', String(range.end - range.start + 1));
  } else if (size !== undefined) {
    res.setHeader('Content-Length', String(size));
  }
}

/** One `bytes=` range; a header that is not exactly one (several ranges, or malformed) gets the whole file. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined | 'unsatisfiable' {
  if (!header) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match) return undefined;
  const [, from, to] = match;
  if (from === '' && to === '') return undefined;
  let start: number;
  let end: number;
  if (from === '') {
    const suffix = Number(to);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(from);
    end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  }
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

const dispositionName = (name: string) =>
  `filename="${name.replace(/[^\x20-\x7e]/g, '_').replace(/[\\"]/g, '_')}"; filename*=UTF-8''${rfc5987(name)}`;

/** RFC 5987 value characters: encodeURIComponent leaves ' ( ) * as they are. */
const rfc5987 = (name: string) =>
  encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
