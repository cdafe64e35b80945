// Reads .log files with Apache Kafka's own client classes (FileRecords) and prints what Kafka sees, one
// JSON object per line, so test_kafka_reads_our_logs.py can compare it with tidelog's view.
// Usage: java -cp kafka-clients.jar KafkaLogCheck.java <searchTimestamp> <file.log>...
import java.io.File;
import org.apache.kafka.common.record.FileLogInputStream;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;

public class KafkaLogCheck {
    public static void main(String[] args) throws Exception {
        long searchTs = Long.parseLong(args[0]);
        for (int i = 1; i < args.length; i++) {
            FileRecords records = FileRecords.open(new File(args[i]));
            for (FileLogInputStream.FileChannelRecordBatch batch : records.batches()) {
                batch.ensureValid();
                int count = 0;
                for (Record r : batch) {
                    r.ensureValid();
                    count++;
                }
                System.out.println("{\"file\":" + i + ",\"pos\":" + batch.position() + ",\"base\":" + batch.baseOffset()
                    + ",\"last\":" + batch.lastOffset() + ",\"maxTs\":" + batch.maxTimestamp()
                    + ",\"epoch\":" + batch.partitionLeaderEpoch() + ",\"count\":" + count + "}");
            }
            FileRecords.TimestampAndOffset found = records.searchForTimestamp(searchTs, 0, 0L);
            System.out.println("{\"file\":" + i + ",\"searchTs\":" + (found == null ? -1 : found.timestamp)
                + ",\"searchOffset\":" + (found == null ? -1 : found.offset) + "}");
            records.close();
        }
    }
}
