import { randomInt } from 'node:crypto';
import { createRequire } from 'node:module';

// svg-captcha is CommonJS; its default export draws a given text.
const svgCaptcha = createRequire(import.meta.url)('svg-captcha') as (text: string, options?: object) => string;

/**
 * The characters a captcha is drawn from: digits and capital letters without those people
 * confuse (0/O, 1/I/L), 31 in all. Answers are compared case-insensitively.
 */
export const CAPTCHA_ALPHABET = '23456789ABCDEFGHJKMNPQRSTUVWXYZ';
const CAPTCHA_LENGTH = 4;

/** A captcha text: each character drawn uniformly (crypto.randomInt) from CAPTCHA_ALPHABET. */
export function drawCaptchaText(length = CAPTCHA_LENGTH): string {
  let text = '';
  for (let i = 0; i < length; i++) text += CAPTCHA_ALPHABET[randomInt(CAPTCHA_ALPHABET.length)];
  return text;
}

const OPTIONS = {
  size: CAPTCHA_LENGTH,
  noise: 2,
  // Dark grey characters, no `background` (which would switch svg-captcha to its colours, pale
  // at 55–75% lightness on white); sharp puts the white behind them.
  color: false,
  width: 120,
  height: 44,
  fontSize: 48,
};

export interface Captcha {
  answer: string;
  jpeg: Buffer;
}

/**
 * Draws a captcha and rasterises it to JPEG. `fixedAnswer` (CAPTCHA_TEST_ANSWER, tests only)
 * fixes the text; the drawing still changes every time.
 */
export async function renderCaptcha(fixedAnswer?: string): Promise<Captcha> {
  const answer = fixedAnswer ?? drawCaptchaText();
  const svg = svgCaptcha(answer, OPTIONS);
  // Loaded on first use (then cached by Node): a process that never draws one starts without libvips.
  const { default: sharp } = await import('sharp');
  const jpeg = await sharp(Buffer.from(svg)).flatten({ background: '#ffffff' }).jpeg({ quality: 80 }).toBuffer();
  return { answer, jpeg };
}
