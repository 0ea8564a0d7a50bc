// The one HTTP client: typed from the committed OpenAPI document, same-origin, signed in by the
// session cookie that `POST /api/v1/session` sets.
import createClient from 'openapi-fetch';
import type { components, paths } from './schema';

export type Schemas = components['schemas'];

export const api = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });

/** An error the API answered with a problem document (RFC 9457), or a network failure. */
export class ApiError extends Error {
  readonly status: number;
  readonly engineError?: string | null;
  constructor(status: number, detail: string, engineError?: string | null) {
    super(detail);
    this.name = 'ApiError';
    this.status = status;
    this.engineError = engineError;
  }
}

/** Unwraps an openapi-fetch result: the data, or an `ApiError` carrying the problem's detail. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let r;
  try {
    r = await call;
  } catch (e) {
    throw new ApiError(0, `the server did not answer: ${String(e)}`);
  }
  if (r.error !== undefined || !r.response.ok) {
    const p = r.error as Partial<Schemas['Problem']> | undefined;
    throw new ApiError(
      r.response.status,
      p?.detail ?? r.response.statusText ?? 'request failed',
      p?.engine_error,
    );
  }
  return r.data as T;
}

/** Exchanges the token for the session cookie. */
export async function signIn(token: string): Promise<void> {
  await unwrap(
    api.POST('/api/v1/session', { headers: { Authorization: `Bearer ${token.trim()}` } }),
  );
}
