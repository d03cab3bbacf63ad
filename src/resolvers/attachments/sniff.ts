import type { AttachmentKind } from '../../db/schema.js';
import { badInput } from '../../errors.js';

/** The type of an uploaded file, decided from its first bytes, and the kind it makes. */

/** Images accepted as kind `image`: re-encoded in their own format, metadata dropped. */
export const IMAGE_MIMES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif'] as const;
/** Bytes read before the type is decided from them. */
export const SNIFF_BYTES = 4096;

/** The type of a file, from its first bytes; `family` says which kinds it may be. */
export interface Sniffed {
  mime: string;
  family: 'image' | 'video' | 'audio' | 'other';
}

const ascii = (b: Buffer, start: number, end: number) => b.subarray(start, end).toString('latin1');

/**
 * Decides a file's type from its magic numbers, never from its name or the client's
 * Content-Type. Only what a chat needs is recognised; anything else is a plain file.
 */
export function sniff(head: Buffer): Sniffed {
  const b = head;
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return { mime: 'image/jpeg', family: 'image' };
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    return { mime: 'image/png', family: 'image' };
  if (/^GIF8[79]a/.test(ascii(b, 0, 6))) return { mime: 'image/gif', family: 'image' };
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP') return { mime: 'image/webp', family: 'image' };
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WAVE') return { mime: 'audio/wav', family: 'audio' };
  if (ascii(b, 4, 8) === 'ftyp') {
    const brand = ascii(b, 8, 12);
    if (/^M4[AB] /.test(brand)) return { mime: 'audio/mp4', family: 'audio' };
    if (brand === 'qt  ') return { mime: 'video/quicktime', family: 'video' };
    if (/^(hei[cx]|mif1|msf1|avif|avis)/.test(brand)) return { mime: 'application/octet-stream', family: 'other' };
    return { mime: 'video/mp4', family: 'video' };
  }
  if (b.length >= 4 && b.readUInt32BE(0) === 0x1a45dfa3) {
    const webm = ascii(b, 0, Math.min(b.length, 64)).includes('webm');
    return webm ? { mime: 'video/webm', family: 'video' } : { mime: 'video/x-matroska', family: 'video' };
  }
  if (ascii(b, 0, 4) === 'OggS') {
    const text = ascii(b, 0, Math.min(b.length, 128));
    return /theora/.test(text) ? { mime: 'video/ogg', family: 'video' } : { mime: 'audio/ogg', family: 'audio' };
  }
  if (ascii(b, 0, 3) === 'ID3') return { mime: 'audio/mpeg', family: 'audio' };
  if (ascii(b, 0, 5) === '#!AMR') return { mime: 'audio/amr', family: 'audio' };
  if (ascii(b, 0, 4) === 'fLaC') return { mime: 'audio/flac', family: 'audio' };
  if (b.length >= 2 && b[0] === 0xff && ((b[1] ?? 0) & 0xf6) === 0xf0) return { mime: 'audio/aac', family: 'audio' };
  if (b.length >= 2 && b[0] === 0xff && ((b[1] ?? 0) & 0xe0) === 0xe0) return { mime: 'audio/mpeg', family: 'audio' };
  if (ascii(b, 0, 5) === '%PDF-') return { mime: 'application/pdf', family: 'other' };
  if (ascii(b, 0, 4) === 'PK\x03\x04') return { mime: 'application/zip', family: 'other' };
  return { mime: textMime(b), family: 'other' };
}

/** Markup is recognised so that it is labelled as what it is (and then only ever downloaded). */
function textMime(b: Buffer): string {
  if (b.includes(0)) return 'application/octet-stream';
  const text = b
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  if (/<svg[\s>]/.test(text.slice(0, 1024))) return 'image/svg+xml';
  if (/^<(!doctype html|html|head|body|script|iframe|!--)/.test(text) || /<(html|script|body)[\s>]/.test(text))
    return 'text/html';
  if (text.startsWith('<?xml')) return 'application/xml';
  // A character cut at the end of the sniffed bytes is not a decoding error.
  return b.toString('utf8').slice(0, -1).includes('\uFFFD') ? 'application/octet-stream' : 'text/plain';
}

/** The kind a sniffed type makes when the client did not say, or the refusal when it said otherwise. */
export function kindFor(s: Sniffed, declared: AttachmentKind | undefined): AttachmentKind {
  const imageOk = (IMAGE_MIMES as readonly string[]).includes(s.mime);
  if (!declared) {
    if (imageOk) return 'image';
    if (s.family === 'video') return 'video';
    if (s.family === 'audio') return 'voice';
    return 'file';
  }
  if (declared === 'image' && !imageOk)
    throw badInput(`The file is not an image in an accepted format (JPEG, PNG, WebP, GIF): ${s.mime}`);
  if (declared === 'video' && s.family !== 'video') throw badInput(`The file is not a video: ${s.mime}`);
  // Recorders produce voice in audio containers and in WebM/Matroska/MP4.
  if (declared === 'voice' && s.family !== 'audio' && s.family !== 'video')
    throw badInput(`The file is not audio: ${s.mime}`);
  return declared;
}
