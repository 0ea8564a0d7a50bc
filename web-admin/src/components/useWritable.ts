import { useServer } from '../api/queries';

/** False on a read-only store: pages hide every write control. */
export function useWritable(): boolean {
  return useServer().data?.read_only === false;
}
