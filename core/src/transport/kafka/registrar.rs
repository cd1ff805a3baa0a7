//! The registrations of the Kafka transport: each appended by the plain
//! idempotent producer (librdkafka) to the role's state partition.

use super::*;

#[async_trait]
impl Registrar for KafkaTransport {
    async fn append(&self, record: StateRecord) -> Result<i64> {
        let StateRecord {
            partition,
            key,
            value,
        } = record;
        check_partition(partition)?;
        let producer = self
            .registrar
            .as_ref()
            .expect("the registration producer lives as long as the transport");
        let topic = self.config.state_topic();
        let mut record = FutureRecord::<[u8], [u8]>::to(topic)
            .partition(partition)
            .key(key.as_slice());
        if let Some(v) = &value {
            record = record.payload(v.as_slice());
        }
        let context = format!("append to {topic}/{partition}");
        match producer.send(record, self.config.operation_timeout()).await {
            Ok(delivery) => Ok(delivery.offset),
            Err((e, _)) => {
                if let Some((code, reason)) = producer.client().fatal_error() {
                    return Err(Error::fatal(
                        context,
                        format!("fatal producer error {code:?}: {reason}"),
                    ));
                }
                Err(match e.rdkafka_error_code() {
                    Some(RDKafkaErrorCode::UnknownPartition) => Error::InvalidArgument(format!(
                        "{context}: the topic has no partition {partition}"
                    )),
                    _ => kafka_error(&context, e),
                })
            }
        }
    }
}
