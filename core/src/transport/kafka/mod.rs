//! The Kafka transport: rdkafka producers and consumer, and a small
//! DescribeTransactions client on the `kafka-protocol` crate.
