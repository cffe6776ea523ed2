package chatter;

import com.azure.cosmos.CosmosClient;
import com.azure.cosmos.CosmosClientBuilder;
import com.azure.cosmos.CosmosContainer;
import com.azure.cosmos.CosmosDatabase;
import com.azure.cosmos.CosmosException;
import com.azure.cosmos.models.CosmosBatch;
import com.azure.cosmos.models.CosmosBatchOperationResult;
import com.azure.cosmos.models.CosmosBatchResponse;
import com.azure.cosmos.models.CosmosChangeFeedRequestOptions;
import com.azure.cosmos.models.CosmosContainerProperties;
import com.azure.cosmos.models.CosmosItemRequestOptions;
import com.azure.cosmos.models.CosmosPatchOperations;
import com.azure.cosmos.models.CosmosQueryRequestOptions;
import com.azure.cosmos.models.FeedRange;
import com.azure.cosmos.models.FeedResponse;
import com.azure.cosmos.models.PartitionKey;
import com.azure.cosmos.models.PartitionKeyDefinition;
import com.azure.cosmos.models.PartitionKeyDefinitionVersion;
import com.azure.cosmos.models.SqlParameter;
import com.azure.cosmos.models.SqlQuerySpec;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Drives the project emulator through Microsoft's Java SDK the way its users do (gateway mode), and prints what it
 * saw as one JSON object on stdout; tests/integration/test_emulator_sdks.py asserts on it.
 *
 * <p>{@code write ENDPOINT KEY DB CONTAINER LABEL COUNT}: make the container (partition key /pk) if missing, CRUD,
 * patch, a transactional batch (one that commits, one that rolls back), a query, then COUNT documents
 * {@code LABEL-i} over 16 partition keys. {@code feed ... STATE_IN|-}: read the change feed of every feed range
 * from the beginning (or, given the JSON of an earlier run, from each range's continuation) page by page to its end.
 */
public final class SdkClient {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int PAGE = 5;

    private SdkClient() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            throw new IllegalArgumentException("usage: write|feed ENDPOINT KEY DB CONTAINER [LABEL COUNT | STATE]");
        }
        CosmosClient client = new CosmosClientBuilder()
                .endpoint(args[1])
                .key(args[2])
                .gatewayMode()
                .endpointDiscoveryEnabled(false)
                .contentResponseOnWriteEnabled(true)
                .buildClient();
        try {
            client.createDatabaseIfNotExists(args[3]);
            CosmosDatabase database = client.getDatabase(args[3]);
            // Hash V2 (the Java SDK's default is V1, which the emulator keeps in the first range): keys spread.
            PartitionKeyDefinition key = new PartitionKeyDefinition();
            key.setPaths(List.of("/pk"));
            key.setVersion(PartitionKeyDefinitionVersion.V2);
            database.createContainerIfNotExists(new CosmosContainerProperties(args[4], key));
            CosmosContainer container = database.getContainer(args[4]);
            ObjectNode out = JSON.createObjectNode();
            out.put("sdk", "java");
            if (args[0].equals("write")) {
                write(container, args[5], Integer.parseInt(args[6]), out);
            } else if (args[0].equals("feed")) {
                feed(container, args.length > 5 && !args[5].equals("-") ? Path.of(args[5]) : null, out);
            } else {
                throw new IllegalArgumentException("unknown command " + args[0]);
            }
            System.out.println(JSON.writeValueAsString(out));
        } finally {
            client.close();
        }
    }

    private static ObjectNode doc(String id, String pk) {
        ObjectNode doc = JSON.createObjectNode();
        doc.put("id", id);
        doc.put("pk", pk);
        return doc;
    }

    private static int status(Runnable call) {
        try {
            call.run();
            return 200;
        } catch (CosmosException e) {
            return e.getStatusCode();
        }
    }

    private static void write(CosmosContainer c, String label, int count, ObjectNode out) {
        String pk = label + "-crud";
        PartitionKey key = new PartitionKey(pk);
        ObjectNode crud = out.putObject("crud");
        ObjectNode item = doc(label + "-item", pk);
        item.put("n", 1);
        crud.put("create", c.createItem(item, key, new CosmosItemRequestOptions()).getStatusCode());
        crud.put("create_again", status(() -> c.createItem(item, key, new CosmosItemRequestOptions())));
        crud.put("read_n", c.readItem(item.get("id").asText(), key, ObjectNode.class).getItem().get("n").asInt());
        item.put("n", 2);
        crud.put("replace", c.replaceItem(item, item.get("id").asText(), key, new CosmosItemRequestOptions())
                .getStatusCode());
        item.put("n", 3);
        crud.put("upsert", c.upsertItem(item).getStatusCode());
        crud.put("read_after_upsert_n",
                c.readItem(item.get("id").asText(), key, ObjectNode.class).getItem().get("n").asInt());

        ObjectNode patched = c.patchItem(item.get("id").asText(), key,
                CosmosPatchOperations.create().set("/status", "patched").increment("/n", 10), ObjectNode.class)
                .getItem();
        ObjectNode patch = out.putObject("patch");
        patch.put("status", patched.get("status").asText());
        patch.put("n", patched.get("n").asInt());

        crud.put("delete", c.deleteItem(item.get("id").asText(), key, new CosmosItemRequestOptions())
                .getStatusCode());
        crud.put("read_deleted", status(() -> c.readItem(item.get("id").asText(), key, ObjectNode.class)));

        ObjectNode batch = out.putObject("batch");
        String bpk = label + "-batch";
        CosmosBatch ok = CosmosBatch.createCosmosBatch(new PartitionKey(bpk));
        ok.createItemOperation(doc(label + "-b1", bpk));
        ok.upsertItemOperation(doc(label + "-b2", bpk));
        ok.patchItemOperation(label + "-b1", CosmosPatchOperations.create().add("/tag", "in-batch"));
        CosmosBatchResponse committed = c.executeCosmosBatch(ok);
        batch.put("committed", committed.isSuccessStatusCode());
        ArrayNode codes = batch.putArray("committed_codes");
        for (CosmosBatchOperationResult r : committed.getResults()) {
            codes.add(r.getStatusCode());
        }
        batch.put("tag", c.readItem(label + "-b1", new PartitionKey(bpk), ObjectNode.class).getItem()
                .get("tag").asText());
        CosmosBatch bad = CosmosBatch.createCosmosBatch(new PartitionKey(bpk));
        bad.createItemOperation(doc(label + "-b3", bpk));
        bad.createItemOperation(doc(label + "-b1", bpk)); // exists: 409, so the whole batch rolls back
        CosmosBatchResponse rolled = c.executeCosmosBatch(bad);
        batch.put("rolled_back_status", rolled.getStatusCode());
        ArrayNode rcodes = batch.putArray("rolled_back_codes");
        for (CosmosBatchOperationResult r : rolled.getResults()) {
            rcodes.add(r.getStatusCode());
        }
        batch.put("rolled_back_item_read", status(() -> c.readItem(label + "-b3", new PartitionKey(bpk),
                ObjectNode.class)));

        ArrayNode written = out.putArray("written");
        for (int i = 0; i < count; i++) {
            ObjectNode d = doc(label + "-" + i, "tenant-" + (i % 16));
            d.put("label", label);
            c.createItem(d, new PartitionKey(d.get("pk").asText()), new CosmosItemRequestOptions());
            written.add(d.get("id").asText());
        }
        SqlQuerySpec spec = new SqlQuerySpec("SELECT c.id FROM c WHERE c.label = @label",
                List.of(new SqlParameter("@label", label)));
        ArrayNode queried = out.putArray("queried");
        for (ObjectNode row : c.queryItems(spec, new CosmosQueryRequestOptions(), ObjectNode.class)) {
            queried.add(row.get("id").asText());
        }
    }

    private static void feed(CosmosContainer c, Path state, ObjectNode out) throws Exception {
        List<String> starts = new ArrayList<>();
        List<FeedRange> ranges = c.getFeedRanges();
        out.put("feed_ranges", ranges.size());
        if (state == null) {
            for (FeedRange range : ranges) {
                starts.add(null);
            }
        } else {
            for (var range : JSON.readTree(Files.readString(state)).get("ranges")) {
                starts.add(range.get("continuation").asText());
            }
        }
        ArrayNode results = out.putArray("ranges");
        for (int i = 0; i < starts.size(); i++) {
            CosmosChangeFeedRequestOptions options = starts.get(i) == null
                    ? CosmosChangeFeedRequestOptions.createForProcessingFromBeginning(ranges.get(i))
                    : CosmosChangeFeedRequestOptions.createForProcessingFromContinuation(starts.get(i));
            options.setMaxItemCount(PAGE);
            ObjectNode result = results.addObject();
            ArrayNode ids = result.putArray("ids");
            ArrayNode continuations = result.putArray("continuations");
            int pages = 0;
            String last = starts.get(i);
            for (FeedResponse<ObjectNode> page : c.queryChangeFeed(options, ObjectNode.class).iterableByPage()) {
                pages++;
                for (ObjectNode d : page.getResults()) {
                    ids.add(d.get("id").asText());
                }
                if (page.getContinuationToken() != null) {
                    last = page.getContinuationToken();
                    continuations.add(last);
                }
                if (page.getResults().isEmpty() || pages > 1000) {
                    break; // the end of the feed for now (a 304)
                }
            }
            result.put("pages", pages);
            result.put("continuation", last);
        }
    }
}
