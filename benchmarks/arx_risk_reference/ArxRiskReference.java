import java.io.BufferedReader;
import java.io.File;
import java.io.FileReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.deidentifier.arx.ARXAnonymizer;
import org.deidentifier.arx.ARXConfiguration;
import org.deidentifier.arx.ARXPopulationModel;
import org.deidentifier.arx.ARXPopulationModel.Region;
import org.deidentifier.arx.AttributeType;
import org.deidentifier.arx.AttributeType.Hierarchy;
import org.deidentifier.arx.AttributeType.Hierarchy.DefaultHierarchy;
import org.deidentifier.arx.Data;
import org.deidentifier.arx.Data.DefaultData;
import org.deidentifier.arx.DataHandle;
import org.deidentifier.arx.DataSource;
import org.deidentifier.arx.DataSubset;
import org.deidentifier.arx.criteria.Inclusion;
import org.deidentifier.arx.risk.RiskEstimateBuilder;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness;
import org.deidentifier.arx.risk.RiskModelPopulationUniqueness.PopulationUniquenessModel;
import org.deidentifier.arx.risk.RiskModelSampleRisks;
import org.deidentifier.arx.risk.RiskModelSampleSummary;
import org.deidentifier.arx.risk.RiskModelSampleUniqueness;

/**
 * ARX 3.9.2's re-identification risk estimates, the reference for duckanon/risk/population.py.
 *
 * Reads cases from stdin, one per line, tab-separated, and prints one JSON object per case:
 *
 *   sample      NAME  SOURCE  QIS  POPULATIONS  THRESHOLDS
 *   journalist  NAME  CSV     QIS  EVERY        THRESHOLDS
 *
 * SOURCE is "csv:PATH" (a comma-separated file with a header, every column read as a string) or
 * "histogram:1x50,2x20,..." (a one-column data set "class" with 50 classes of one record, 20 of two, ...).
 * QIS are comma-separated column names. POPULATIONS are comma-separated "fraction:0.01" (ARXPopulationModel.create(n,
 * 0.01)), "region:USA" (ARXPopulationModel.create(Region.USA)) or "size:123456". THRESHOLDS are comma-separated.
 * A "sample" case gives the class-size histogram ARX sees, its sample-based risks (RiskModelSampleRisks,
 * RiskModelSampleUniqueness, RiskModelSampleSummary per threshold) and, per population, RiskModelPopulationUniqueness
 * under the default ARXSolverConfiguration. A "journalist" case takes every EVERY-th record (row % EVERY == 0) of the
 * CSV as the sample, a research subset of the whole file, which is the population (the input handle's view once the
 * data is anonymized with Inclusion(subset) alone), and gives RiskModelSampleSummary per threshold, with each sample
 * class's size in the sample and in the population (counted here, as pairs: sample size, population size, classes).
 * The "elapsed_ms" of each population estimate tells whether ARX's solver may have hit its clock limits.
 *
 *   javac -cp "arx-3.9.2-core.jar:lib/*" -d classes ArxRiskReference.java
 *   java -cp "classes:arx-3.9.2-core.jar:lib/*" ArxRiskReference < cases.tsv > results.jsonl
 */
public class ArxRiskReference {

    private static final Map<String, Data> CSV_DATA = new HashMap<>();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t", -1);
            switch (f[0]) {
            case "sample": System.out.println(sample(f[1], f[2], qis(f[3]), f[4].split(","), thresholds(f[5]))); break;
            case "journalist":
                System.out.println(journalist(f[1], f[2], qis(f[3]), Integer.parseInt(f[4]), thresholds(f[5])));
                break;
            default: throw new IllegalArgumentException("unknown case kind " + f[0]);
            }
            System.out.flush();
        }
    }

    static Set<String> qis(String list) {
        return new LinkedHashSet<>(Arrays.asList(list.split(",")));
    }

    static double[] thresholds(String list) {
        return Arrays.stream(list.split(",")).mapToDouble(Double::parseDouble).toArray();
    }

    // ------------------------------------------------------------------------------------------------------ data

    static Data load(String source) throws Exception {
        if (source.startsWith("csv:")) {
            String path = source.substring(4);
            Data cached = CSV_DATA.get(path);
            if (cached != null) return cached;
            String[] header;
            try (BufferedReader r = new BufferedReader(new FileReader(path, StandardCharsets.UTF_8))) {
                header = r.readLine().split(",", -1);
            }
            DataSource csv = DataSource.createCSVSource(new File(path), StandardCharsets.UTF_8, ',', true);
            for (String column : header) csv.addColumn(column);
            Data data = Data.create(csv);
            CSV_DATA.put(path, data);
            return data;
        }
        if (source.startsWith("histogram:")) {
            DefaultData data = Data.create();
            data.add("class");
            int id = 0;
            for (String entry : source.substring(10).split(",")) {
                String[] sc = entry.split("x");
                int size = Integer.parseInt(sc[0]), count = Integer.parseInt(sc[1]);
                for (int c = 0; c < count; c++, id++) {
                    for (int r = 0; r < size; r++) data.add("c" + id);
                }
            }
            return data;
        }
        throw new IllegalArgumentException("unknown source " + source);
    }

    static ARXPopulationModel population(String spec, int records) {
        String[] kv = spec.split(":");
        switch (kv[0]) {
        case "fraction": return ARXPopulationModel.create(records, Double.parseDouble(kv[1]));
        case "region": return ARXPopulationModel.create(Region.valueOf(kv[1]));
        case "size": return ARXPopulationModel.create(Long.parseLong(kv[1]));
        default: throw new IllegalArgumentException("unknown population " + spec);
        }
    }

    // ----------------------------------------------------------------------------------------------------- cases

    static String sample(String name, String source, Set<String> qis, String[] populations, double[] thresholds)
            throws Exception {
        Data data = load(source);
        DataHandle handle = data.getHandle();
        int records = handle.getNumRows();
        RiskEstimateBuilder base = handle.getRiskEstimator(population(populations[0], records), qis);
        StringBuilder json = new StringBuilder();
        json.append("{\"kind\":\"sample\",\"name\":").append(str(name)).append(",\"source\":").append(str(source))
            .append(",\"quasi_identifiers\":").append(strs(qis)).append(",\"records\":").append(records);
        json.append(",\"histogram\":").append(histogram(base.getEquivalenceClassModel().getHistogram()));

        RiskModelSampleRisks risks = base.getSampleBasedReidentificationRisk();
        RiskModelSampleUniqueness uniqueness = base.getSampleBasedUniquenessRisk();
        json.append(",\"sample_risks\":{")
            .append("\"highest_risk\":").append(num(risks.getHighestRisk()))
            .append(",\"lowest_risk\":").append(num(risks.getLowestRisk()))
            .append(",\"average_risk\":").append(num(risks.getAverageRisk()))
            .append(",\"estimated_prosecutor_risk\":").append(num(risks.getEstimatedProsecutorRisk()))
            .append(",\"estimated_journalist_risk\":").append(num(risks.getEstimatedJournalistRisk()))
            .append(",\"estimated_marketer_risk\":").append(num(risks.getEstimatedMarketerRisk()))
            .append(",\"records_affected_by_highest_risk\":").append(num(risks.getNumRecordsAffectedByHighestRisk()))
            .append(",\"records_affected_by_lowest_risk\":").append(num(risks.getNumRecordsAffectedByLowestRisk()))
            .append(",\"sample_uniques\":").append(num(uniqueness.getNumUniqueRecords()))
            .append(",\"sample_uniques_share\":").append(num(uniqueness.getFractionOfUniqueRecords()))
            .append("}");
        json.append(",\"summaries\":").append(summaries(base, thresholds));

        json.append(",\"populations\":[");
        for (int i = 0; i < populations.length; i++) {
            ARXPopulationModel model = population(populations[i], records);
            long start = System.nanoTime();
            RiskModelPopulationUniqueness u = handle.getRiskEstimator(model, qis).getPopulationBasedUniquenessRisk();
            PopulationUniquenessModel chosen = u.getPopulationUniquenessModel();
            long elapsedMs = (System.nanoTime() - start) / 1_000_000;
            json.append(i == 0 ? "" : ",").append("{\"population\":").append(str(populations[i]))
                .append(",\"population_size\":").append(model.getPopulationSize())
                .append(",\"elapsed_ms\":").append(elapsedMs)
                .append(",\"dankar_model\":").append(str(String.valueOf(chosen)));
            for (PopulationUniquenessModel m : PopulationUniquenessModel.values()) {
                String key = m.name().toLowerCase();
                json.append(",\"").append(key).append("\":{\"uniques\":").append(num(u.getNumUniqueTuples(m)))
                    .append(",\"share\":").append(num(u.getFractionOfUniqueTuples(m)))
                    .append(",\"available\":").append(u.isAvailableEstimate(m)).append("}");
            }
            json.append("}");
        }
        json.append("]}");
        return json.toString();
    }

    static String journalist(String name, String csv, Set<String> qis, int every, double[] thresholds)
            throws Exception {
        Data data = load("csv:" + csv);
        DataHandle handle = data.getHandle();
        handle.release();  // a previous case's anonymization locked the definition
        Set<Integer> rows = new java.util.TreeSet<>();
        for (int row = 0; row < handle.getNumRows(); row += every) rows.add(row);
        // ARX makes a research subset's view (whose superset is the whole data) when it anonymizes with the subset;
        // with Inclusion alone every transformation qualifies and the input handle's view is what is measured
        for (int column = 0; column < handle.getNumColumns(); column++) {
            String attribute = handle.getAttributeName(column);
            if (qis.contains(attribute)) {
                DefaultHierarchy hierarchy = Hierarchy.create();
                for (String value : handle.getDistinctValues(column)) hierarchy.add(value, "*");
                data.getDefinition().setAttributeType(attribute, hierarchy);
            } else {
                data.getDefinition().setAttributeType(attribute, AttributeType.INSENSITIVE_ATTRIBUTE);
            }
        }
        ARXConfiguration config = ARXConfiguration.create();
        config.addPrivacyModel(new Inclusion(DataSubset.create(data, rows)));
        new ARXAnonymizer().anonymize(data, config);
        DataHandle view = handle.getView();
        RiskEstimateBuilder builder = view.getRiskEstimator(ARXPopulationModel.create(Region.USA), qis);

        // each sample class's size in the sample and in the population, counted here from the values
        int[] columns = qis.stream().mapToInt(handle::getColumnIndexOf).toArray();
        Map<String, int[]> sizes = new HashMap<>();
        for (int row = 0; row < handle.getNumRows(); row++) {
            int[] counts = sizes.computeIfAbsent(key(handle, row, columns), k -> new int[2]);
            counts[1]++;
            if (rows.contains(row)) counts[0]++;
        }
        TreeMap<String, Integer> pairs = new TreeMap<>();
        List<int[]> ordered = new ArrayList<>();
        for (int[] counts : sizes.values()) {
            if (counts[0] > 0) pairs.merge(String.format("%09d %09d", counts[0], counts[1]), 1, Integer::sum);
        }
        for (Map.Entry<String, Integer> e : pairs.entrySet()) {
            String[] fs = e.getKey().split(" ");
            ordered.add(new int[] {Integer.parseInt(fs[0]), Integer.parseInt(fs[1]), e.getValue()});
        }
        StringBuilder json = new StringBuilder();
        json.append("{\"kind\":\"journalist\",\"name\":").append(str(name)).append(",\"quasi_identifiers\":")
            .append(strs(qis)).append(",\"every\":").append(every).append(",\"sample_records\":").append(rows.size())
            .append(",\"population_records\":").append(handle.getNumRows()).append(",\"pairs\":[");
        for (int i = 0; i < ordered.size(); i++) {
            int[] p = ordered.get(i);
            json.append(i == 0 ? "" : ",").append('[').append(p[0]).append(',').append(p[1]).append(',')
                .append(p[2]).append(']');
        }
        json.append("],\"summaries\":").append(summaries(builder, thresholds)).append('}');
        return json.toString();
    }

    static String key(DataHandle handle, int row, int[] columns) {
        StringBuilder key = new StringBuilder();
        for (int column : columns) key.append(handle.getValue(row, column)).append('\u0001');
        return key.toString();
    }

    static String summaries(RiskEstimateBuilder builder, double[] thresholds) {
        StringBuilder json = new StringBuilder("[");
        for (int i = 0; i < thresholds.length; i++) {
            RiskModelSampleSummary s = builder.getSampleBasedRiskSummary(thresholds[i]);
            json.append(i == 0 ? "" : ",").append("{\"threshold\":").append(num(thresholds[i]))
                .append(",\"prosecutor\":").append(summary(s.getProsecutorRisk()))
                .append(",\"journalist\":").append(summary(s.getJournalistRisk()))
                .append(",\"marketer\":").append(num(s.getMarketerRisk().getSuccessRate())).append('}');
        }
        return json.append(']').toString();
    }

    static String summary(RiskModelSampleSummary.RiskSummary r) {
        return "{\"highest_risk\":" + num(r.getHighestRisk()) + ",\"lowest_risk\":" + num(r.getLowestRisk())
               + ",\"average_risk\":" + num(r.getAverageRisk()) + ",\"records_at_risk\":"
               + num(r.getRecordsAtRisk()) + "}";
    }

    // ------------------------------------------------------------------------------------------------------ json

    static String histogram(int[] pairs) {
        StringBuilder sizes = new StringBuilder("["), counts = new StringBuilder("[");
        for (int i = 0; i < pairs.length; i += 2) {
            sizes.append(i == 0 ? "" : ",").append(pairs[i]);
            counts.append(i == 0 ? "" : ",").append(pairs[i + 1]);
        }
        return "{\"sizes\":" + sizes + "],\"counts\":" + counts + "]}";
    }

    static String num(double value) {
        return Double.isFinite(value) ? Double.toString(value) : "null";
    }

    static String str(String value) {
        return '"' + value.replace("\\", "\\\\").replace("\"", "\\\"") + '"';
    }

    static String strs(Set<String> values) {
        StringBuilder json = new StringBuilder("[");
        for (String v : values) json.append(json.length() == 1 ? "" : ",").append(str(v));
        return json.append(']').toString();
    }
}
