import { Alert } from '@mantine/core';
import { ApiError } from '../api/client';

/** What went wrong, as the server said it. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : new ApiError(0, String(error));
  return (
    <Alert color="red" title={e.status ? `Error ${e.status}` : 'Error'} role="alert">
      {e.message}
      {e.engineError ? ` (engine: ${e.engineError})` : ''}
    </Alert>
  );
}
