import { createRequire } from 'node:module';
import sharp from 'sharp';

// svg-captcha is CommonJS; its default export draws a given text.
const svgCaptcha = createRequire(import.meta.url)('svg-captcha') as {
  (text: string, options?: object): string;
  randomText(size: number): string;
};

const OPTIONS = {
  size: 4,
  // Characters people confuse (0/o, 1/l/i) are never used.
  ignoreChars: '0oO1lIi',
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
  const answer = fixedAnswer ?? svgCaptcha.randomText(OPTIONS.size).replace(/[0oO1lIi]/g, 'x');
  const svg = svgCaptcha(answer, OPTIONS);
  const jpeg = await sharp(Buffer.from(svg)).flatten({ background: '#ffffff' }).jpeg({ quality: 80 }).toBuffer();
  return { answer, jpeg };
}
