/**
 * The three tools a document review may use, each with the JSON schema its
 * parameters must match and whether it reaches outside this process. A tool
 * reads the immutable document and the outputs of earlier steps; it never
 * sees the planner's text, only parameters that passed the policy.
 */

import { Type, type Static, type TSchema } from '@sinclair/typebox';

export const TOOL_NAMES = ['extract', 'validate', 'draft'] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/** The supplier fields extract looks for and validate may require. */
export const SUPPLIER_FIELDS = ['supplierName', 'taxId', 'iban', 'address', 'invoiceTotal'] as const;
export type SupplierField = (typeof SUPPLIER_FIELDS)[number];

const DocumentId = Type.String({ pattern: '^doc_[A-Za-z0-9_-]{8,64}$' });

export const TOOL_PARAMS = {
  extract: Type.Object({ documentId: DocumentId }, { additionalProperties: false }),
  validate: Type.Object(
    {
      documentId: DocumentId,
      requiredFields: Type.Array(Type.Union(SUPPLIER_FIELDS.map((field) => Type.Literal(field))), {
        minItems: 1,
        maxItems: SUPPLIER_FIELDS.length,
        uniqueItems: true,
      }),
    },
    { additionalProperties: false },
  ),
  draft: Type.Object({ documentId: DocumentId, maxWords: Type.Integer({ minimum: 20, maximum: 300 }) }, { additionalProperties: false }),
} satisfies Record<ToolName, TSchema>;

export type ToolParams = { [N in ToolName]: Static<(typeof TOOL_PARAMS)[N]> };

export interface Extraction {
  readonly fields: Partial<Record<SupplierField, string>>;
  readonly characters: number;
}

export interface Validation {
  readonly missing: readonly SupplierField[];
  readonly invalid: readonly SupplierField[];
}

export interface Draft {
  readonly note: string;
}

/** What the steps so far produced: the latest safe output of each tool. */
export interface StepOutputs {
  readonly extract?: Extraction;
  readonly validate?: Validation;
  readonly draft?: Draft;
}

/** The tools each tool needs to have run first. */
export const PREREQUISITES: Readonly<Record<ToolName, readonly ToolName[]>> = {
  extract: [],
  validate: ['extract'],
  draft: ['extract', 'validate'],
};

/** The least time a step needs before the job's deadline; trusted code refuses a step with less left. */
export const MIN_STEP_MS: Readonly<Record<ToolName, number>> = { extract: 200, validate: 100, draft: 200 };

const LABELS: Readonly<Record<SupplierField, RegExp>> = {
  supplierName: /^(supplier|supplier name|vendor)$/i,
  taxId: /^(tax id|vat|vat number|tax number)$/i,
  iban: /^(iban|bank account)$/i,
  address: /^(address)$/i,
  invoiceTotal: /^(total|invoice total|amount due)$/i,
};

/** `Label: value` lines of the document, matched to supplier fields; the first of each wins. */
export function extract(text: string): Extraction {
  const fields: Partial<Record<SupplierField, string>> = {};
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const label = line.slice(0, colon).trim();
    const value = line
      .slice(colon + 1)
      .trim()
      .slice(0, 200);
    if (value === '') continue;
    for (const field of SUPPLIER_FIELDS) {
      if (fields[field] === undefined && LABELS[field].test(label)) fields[field] = value;
    }
  }
  return { fields, characters: text.length };
}

/** ISO 13616 check digits: move the first four characters to the end, letters to numbers, mod 97 = 1. */
function ibanValid(value: string): boolean {
  const iban = value.replace(/\s+/g, '').toUpperCase();
  if (!/^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$/.test(iban)) return false;
  const digits = `${iban.slice(4)}${iban.slice(0, 4)}`.replace(/[A-Z]/g, (letter) => String(letter.charCodeAt(0) - 55));
  let remainder = 0;
  for (const digit of digits) remainder = (remainder * 10 + Number(digit)) % 97;
  return remainder === 1;
}

const FORMATS: Readonly<Partial<Record<SupplierField, (value: string) => boolean>>> = {
  taxId: (value) => /^[A-Z]{2}[A-Z0-9]{8,12}$/.test(value.replace(/\s+/g, '').toUpperCase()),
  iban: ibanValid,
  invoiceTotal: (value) => /^[A-Z]{3}\s?[0-9]+(\.[0-9]{2})?$/.test(value),
};

export function validate(extraction: Extraction, required: readonly SupplierField[]): Validation {
  const missing = required.filter((field) => extraction.fields[field] === undefined);
  const invalid = SUPPLIER_FIELDS.filter((field) => {
    const value = extraction.fields[field];
    const format = FORMATS[field];
    return value !== undefined && format !== undefined && !format(value);
  });
  return { missing, invalid };
}

/** A note for the reviewer, who decides and writes to the supplier themselves. */
export function draft(title: string, extraction: Extraction, validation: Validation, maxWords: number): Draft {
  const supplier = extraction.fields.supplierName ?? 'an unnamed supplier';
  const lines = [`Review note for "${title}" from ${supplier}.`];
  if (validation.missing.length === 0 && validation.invalid.length === 0) {
    lines.push('All required supplier fields are present and well formed.');
  } else {
    if (validation.missing.length > 0) lines.push(`Missing: ${validation.missing.join(', ')}.`);
    if (validation.invalid.length > 0) lines.push(`Malformed: ${validation.invalid.join(', ')}.`);
    lines.push('Ask the supplier for corrected details before approving.');
  }
  lines.push('Nothing has been sent: the reviewer contacts the supplier.');
  const words = lines.join(' ').split(/\s+/);
  return { note: words.length <= maxWords ? words.join(' ') : `${words.slice(0, maxWords).join(' ')} …` };
}
