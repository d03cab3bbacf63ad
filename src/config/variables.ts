import { z } from 'zod';

/** A switch: `1`/`true`/`on`/`yes` or `0`/`false`/`off`/`no`. */
export const bool = z
  .enum(['1', '0', 'true', 'false', 'on', 'off', 'yes', 'no'])
  .transform((v) => ['1', 'true', 'on', 'yes'].includes(v));
export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
export const url = (protocols: string[]) =>
  z
    .string()
    .url()
    .refine((v) => protocols.includes(new URL(v).protocol), `must start with ${protocols.join(' or ')}//`);

/** The parsed values of a concern's variables. */
export type Parsed<Shape extends z.ZodRawShape> = z.output<z.ZodObject<Shape>>;
