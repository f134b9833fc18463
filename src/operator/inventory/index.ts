// What manager.ts wires of the inventory (ApiKeyInventory): its reconciler, events and gauge, its
// watches, and the inventories that name a ClusterKeyIssuer (which the issuers' deletion waits for).
// Everything else of inventory/ is its own.
export { InventoryEventRecorder } from './events.ts';
export { registerInventoryGauge, type InventoryCounts } from './metrics.ts';
export { InventoryReconciler } from './reconciler.ts';
export { inventoryWatches, issuerInventories } from './watches.ts';
